"""The parts of torch's c10d Backend API that torch 2.14 builds features on, on "ring":
coalescing (torch's _coalescing_manager with a device, batch_isend_irecv), checked against gloo
in the same run and against the flight recorder (one task for the whole block)."""
import pytest
import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _coalescing_manager

import torch_ring_backend
from checks import Report, assert_reports_pass
from harness import WORLDS
from reference import exact_input, payload


def _recorded():
    return [e["collective"] for e in torch_ring_backend.flight_recorder()]


def coalesced_all_reduces(ctx):
    """N all_reduces inside torch's coalescing manager (given a device, so the backend's
    start/endCoalescing run): the sums of gloo, and ONE fused task on the ring."""
    report = Report()
    me = ctx.rank
    sizes = [1, 7, 0, 1009, 3]
    # Sums exact in any order: equal to gloo's bit for bit.
    mine = [exact_input(me, n, torch.float32, "SUM", seed=i) for i, n in enumerate(sizes)]
    ring = [t.clone() for t in mine]
    before = len(_recorded())
    with _coalescing_manager(device=torch.device("cpu")):
        for t in ring:
            dist.all_reduce(t)
    after = _recorded()[before:]
    gloo = [t.clone() for t in mine]
    for t in gloo:
        dist.all_reduce(t, group=ctx.gloo)
    for i, (got, want) in enumerate(zip(ring, gloo)):
        report.check(f"tensor {i} of the block", got, want)
    report.check("one task for the block", torch.tensor(after == ["coalesced"]),
                 torch.tensor(True), same_on_all_ranks=False)
    # async: the block's Work covers every call; a broadcast (not captured by torch) is held
    # by the backend and runs with the block too.
    b = payload(me, 33, torch.float64, seed=9)
    c = payload(me, 40, torch.float32, seed=10)
    with _coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        dist.broadcast(b, src=ctx.world - 1)
        dist.all_reduce(c, op=dist.ReduceOp.MAX)
    cm.wait()
    report.check("held broadcast", b, payload(ctx.world - 1, 33, torch.float64, seed=9))
    want_max = torch.stack([payload(r, 40, torch.float32, seed=10) for r in range(ctx.world)]).amax(0)
    report.check("held all_reduce MAX", c, want_max)
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_coalescing_manager_issues_one_task(pool, world):
    assert_reports_pass(pool.run(coalesced_all_reduces), f"coalescing, world {world}")


def batch_exchange(ctx):
    """batch_isend_irecv around the ring (NCCL-style coalescing, since the backend supports it)
    with messages larger than a FIFO: the same as gloo's."""
    report = Report()
    me, w = ctx.rank, ctx.world
    report.check("supports coalescing",
                 torch.tensor(dist.group.WORLD._get_backend(torch.device("cpu")).supports_coalescing),
                 torch.tensor(True), same_on_all_ranks=False)
    if w == 1:
        return report
    send = payload(me, 1 << 20, torch.float32, seed=3)
    recv = torch.empty(1 << 20)
    ops = [dist.P2POp(dist.isend, send, (me + 1) % w), dist.P2POp(dist.irecv, recv, (me - 1) % w)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    report.check("received from the previous rank", recv,
                 payload((me - 1) % w, 1 << 20, torch.float32, seed=3), same_on_all_ranks=False)
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_batch_isend_irecv_through_coalescing(pool, world):
    assert_reports_pass(pool.run(batch_exchange), f"batch_isend_irecv, world {world}")
