"""Issue 25: torch_ring_backend.verify_replicas names the first parameter or buffer whose bits
differ across ranks, with the ranks and the largest difference, measured here independently
over the gloo group; identical replicas pass; so does the example with DDP's default buffer
broadcast, while broadcast_buffers=False names bn.running_mean."""
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import torch_ring_backend
from torch_ring_backend import ReplicaMismatch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 6)
        self.bn = nn.BatchNorm1d(6)


def identical_case(ctx):
    r = torch_ring_backend.verify_replicas(Net())
    return {"ok": r.ok, "checked": r.checked, "text": r.describe()}


def drifted_case(ctx, where):
    net = Net()
    if where == "buffer":
        net.bn.running_mean += 0.25 * ctx.rank  # rank-local statistics
    else:  # the weight's last element one ulp apart on the last rank: bits, not tolerance
        if ctx.rank == ctx.world - 1:
            with torch.no_grad():
                w = net.fc.weight.view(-1)
                w[-1] = torch.nextafter(w[-1], torch.tensor(math.inf))
    tensor = net.bn.running_mean if where == "buffer" else net.fc.weight
    # The largest difference from rank 0, over the gloo group: not through the code under test.
    everyone = [torch.empty_like(tensor) for _ in range(ctx.world)]
    dist.all_gather(everyone, tensor.detach(), group=ctx.gloo)
    expected = max(float((t.double() - everyone[0].double()).abs().max()) for t in everyone)
    try:
        torch_ring_backend.verify_replicas(net)
        return {"raised": False}
    except ReplicaMismatch as e:
        r = e.report
        return {"raised": True, "name": r.mismatch, "kind": r.kind, "ranks": r.differing_ranks,
                "diff": r.max_abs_diff, "expected": expected, "text": str(e)}


@pytest.mark.parametrize("world", [2, 3])
def test_identical_replicas_pass(pool, world):
    for r in pool.run(identical_case):
        assert r["ok"] and r["checked"] == 7, r  # fc.weight, fc.bias, bn.weight, bn.bias + 3 buffers
        assert "identical on every rank" in r["text"], r


@pytest.mark.parametrize("world", [2, 3])
def test_a_drifted_buffer_is_named_with_its_ranks_and_difference(pool, world):
    for r in pool.run(drifted_case, "buffer"):
        assert r["raised"], r
        assert (r["name"], r["kind"]) == ("bn.running_mean", "buffer"), r
        assert r["ranks"] == list(range(1, world)), r
        assert r["diff"] == r["expected"] == 0.25 * (world - 1), r
        assert "buffer 'bn.running_mean' differs across ranks" in r["text"], r


@pytest.mark.parametrize("world", [2, 3])
def test_one_ulp_in_one_weight_is_found(pool, world):
    for r in pool.run(drifted_case, "parameter"):
        assert r["raised"], r
        assert (r["name"], r["ranks"]) == ("fc.weight", [world - 1]), r
        assert 0 < r["diff"] == r["expected"] < 1e-6, r


def unlike_modules_case(ctx):
    net = Net() if ctx.rank == 0 else nn.Linear(4, 6)
    try:
        torch_ring_backend.verify_replicas(net)
    except ValueError as e:
        return str(e)
    return "no error"


@pytest.mark.parametrize("world", [2])
def test_modules_that_are_not_replicas_are_refused(pool, world):
    for text in pool.run(unlike_modules_case):
        assert "other parameters and buffers than this rank" in text, text


def test_the_example_names_running_mean_only_without_the_buffer_broadcast():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                          "--standalone", os.path.join(ROOT, "examples", "verify_replicas.py")],
                         capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert ("broadcast_buffers=False: verify_replicas: buffer 'bn.running_mean' differs across "
            "ranks") in out.stdout, out.stdout
    assert ("broadcast_buffers=True: verify_replicas: all 9 parameters and buffers are identical "
            "on every rank") in out.stdout, out.stdout
