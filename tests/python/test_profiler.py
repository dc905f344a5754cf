"""Issue 25: torch's profiler sees ring's collectives (and sends and receives) as it sees gloo's. A profiled DDP step,
exported as a Chrome trace, holds one `ring:all_reduce` span per gradient bucket (the same set
of collectives as the `gloo:all_reduce` spans of the same step on gloo), each with torch's
`record_param_comms` event inside it carrying ProcessGroupNCCL's metadata (collective name,
element counts, dtype, group size and name), and at least one of them starts before the
backward pass ends (DDP overlaps communication with backward)."""
import json
import os
import tempfile
import threading
import time

import pytest
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


def _model():
    # The first layer is the widest: its gradients come last in backward and take the longest,
    # so the earlier buckets' all_reduces have a core to start on while backward still runs
    # (ranks share two cores here).
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                               torch.nn.Linear(1024, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


def _profiled_step(group, prefix):
    """One profiled DDP step over `group` (after two that build its buckets): the trace's
    spans named `prefix:*`, their record_param_comms children, the backward pass's end, and
    the sizes (in elements) of the buckets DDP reduced in that step."""
    ddp = DDP(_model(), process_group=group, bucket_cap_mb=0.25)
    buckets = []

    def hook(state, bucket):  # DDP's own allreduce, noting each bucket's size as DDP made it
        buckets.append(bucket.buffer().numel())
        return default_hooks.allreduce_hook(state, bucket)

    ddp.register_comm_hook(group, hook)
    x = torch.randn(512, 256)
    for _ in range(2):
        ddp(x).sum().backward()
    buckets.clear()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:
        ddp(x).sum().backward()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    spans = sorted((e for e in events if e["name"].startswith(prefix + ":")), key=lambda e: e["ts"])
    params = [e for e in events if e["name"] == "record_param_comms"]
    backward = [e for e in events if e["name"].startswith("autograd::engine::evaluate_function")]
    inside = []
    for s in spans:
        kids = [p["args"] for p in params if p["tid"] == s["tid"] and
                s["ts"] <= p["ts"] and p["ts"] + p["dur"] <= s["ts"] + s["dur"]]
        inside.append(kids)
    return {
        "spans": [(s["name"], s["ts"], s["dur"]) for s in spans],
        "params": inside,
        "backward_end": max(e["ts"] + e["dur"] for e in backward),
        "buckets": sorted(buckets),
    }


def profile_case(ctx):
    ring = _profiled_step(dist.group.WORLD, "ring")
    gloo = _profiled_step(ctx.gloo, "gloo")
    return {"ring": ring, "gloo": gloo}


@pytest.mark.parametrize("world", [2])
def test_a_profiled_ddp_step_shows_ring_spans_with_their_sizes(pool, world):
    for rank, r in enumerate(pool.run(profile_case)):
        ring, gloo = r["ring"], r["gloo"]
        assert len(ring["buckets"]) >= 2, ring["buckets"]  # the cap makes several buckets
        names = [name for name, _, _ in ring["spans"]]
        assert names == ["ring:all_reduce"] * len(ring["buckets"]), (rank, names, ring["buckets"])
        assert [n for n, _, _ in gloo["spans"]] == ["gloo:all_reduce"] * len(gloo["buckets"])
        assert len(gloo["spans"]) == len(ring["spans"]), (rank, gloo["spans"], ring["spans"])
        sizes = []
        for kids in ring["params"]:
            assert len(kids) == 1, (rank, ring["params"])
            a = kids[0]
            assert a["Collective name"] == "allreduce", a
            assert a["dtype"] == "Float", a
            assert a["Group size"] == world, a
            assert a["In msg nelems"] == a["Out msg nelems"], a
            assert a["Process Group Description"] == "default_pg", a
            sizes.append(a["In msg nelems"])
        assert sorted(sizes) == ring["buckets"], (rank, sizes, ring["buckets"])
        first_start = ring["spans"][0][1]
        assert first_start < ring["backward_end"], (rank, first_start, ring["backward_end"])


def worker_thread_case(ctx):
    """A call larger than the caller's-thread limit runs on the group's worker thread; torch's
    autograd profiler still lists it (its callbacks travel with the call)."""
    t = torch.ones(3 << 20)  # 12 MiB: above TORCH_RING_INLINE_BYTES' 4 MiB default
    with torch.autograd.profiler.profile() as prof:
        work = dist.all_reduce(t, async_op=True)
        # Polled, not waited for: a thread that waits for a call the worker has not taken yet
        # runs it itself (RingWork::wait), and this case is about the worker's thread.
        while not work.is_completed():
            time.sleep(0.001)
        work.wait()
    spans = [e for e in prof.function_events if e.name == "ring:all_reduce"]
    comms = [e for e in prof.function_events if e.name == "record_param_comms"]
    return {"spans": len(spans), "comms": len(comms),
            "other_thread": all(e.thread != threading.get_native_id() for e in spans),
            "ok": bool(torch.all(t == ctx.world))}


@pytest.mark.parametrize("world", [2])
def test_a_call_on_the_worker_thread_is_profiled(pool, world):
    for r in pool.run(worker_thread_case):
        assert r == {"spans": 1, "comms": 1, "other_thread": True, "ok": True}, r


def point_to_point_case(ctx):
    """Rank 0 sends, rank 1 receives, each under torch's profiler."""
    t = torch.arange(1000, dtype=torch.float64) if ctx.rank == 0 else torch.zeros(1000, dtype=torch.float64)
    with torch.autograd.profiler.profile() as prof:
        if ctx.rank == 0:
            dist.send(t, 1)
        else:
            dist.recv(t, 0)
    spans = [e.name for e in prof.function_events if e.name.startswith("ring:")]
    return {"spans": spans, "ok": bool(torch.equal(t, torch.arange(1000, dtype=torch.float64)))}


@pytest.mark.parametrize("world", [2])
def test_send_and_recv_are_profiled(pool, world):
    results = pool.run(point_to_point_case)
    assert results[0] == {"spans": ["ring:send"], "ok": True}, results
    assert results[1] == {"spans": ["ring:recv"], "ok": True}, results


def no_profiler_case(ctx):
    """Without a profiler nothing of it is captured: the call records no event at all."""
    t = torch.ones(8)
    dist.all_reduce(t)
    return t.tolist() == [float(ctx.world)] * 8 and not torch.autograd.profiler._is_profiler_enabled


@pytest.mark.parametrize("world", [2])
def test_without_a_profiler_collectives_still_run(pool, world):
    assert all(pool.run(no_profiler_case))
