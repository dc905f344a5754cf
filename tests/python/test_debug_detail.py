"""TORCH_DISTRIBUTED_DEBUG=DETAIL wraps the ring backend in torch's ProcessGroupWrapper, which
sets and reads the backend's sequence numbers and checks every collective's shapes across ranks
(over its own gloo group) before the ring sees it. The variable must be set before the group
exists, so these tests get ranks of their own."""
import pytest
import torch
import torch.distributed as dist

import torch_ring_backend
from checks import Report, assert_reports_pass

DETAIL_ENV = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}


def detail_collectives(ctx):
    report = Report()
    w, me = ctx.world, ctx.rank
    if str(dist.get_debug_level()) != "DebugLevel.DETAIL":
        report.failures.append(f"debug level is {dist.get_debug_level()}, not DETAIL")
    torch_ring_backend.flight_recorder()  # reachable through the wrapper
    x = torch.full((1009,), float(me + 1))
    dist.all_reduce(x)
    report.check("all_reduce", x, torch.full((1009,), w * (w + 1) / 2))
    t = torch.full((5,), float(me))
    dist.broadcast(t, src=w - 1)
    report.check("broadcast", t, torch.full((5,), float(w - 1)))
    out = torch.empty(w * 3)
    dist.all_gather_into_tensor(out, torch.full((3,), float(me)))
    report.check("all_gather_into_tensor", out, torch.arange(w).float().repeat_interleave(3))
    out = torch.empty(2)
    dist.reduce_scatter_tensor(out, torch.ones(2 * w), op=dist.ReduceOp.AVG)
    report.check("reduce_scatter_tensor AVG", out, torch.ones(2))
    dist.barrier()
    right, left = (me + 1) % w, (me - 1) % w
    got = torch.empty(4)
    works = [dist.isend(torch.full((4,), float(me)), dst=right), dist.irecv(got, src=left)]
    for work in works:
        work.wait()
    report.check("isend/irecv ring", got, torch.full((4,), float(left)), same_on_all_ranks=False)
    # Shapes that differ across ranks: the wrapper must stop the call before the ring runs it.
    report.check_raises("all_reduce with shapes that differ by rank",
                        lambda: dist.all_reduce(torch.ones(3 + me)),
                        ["mismatch", "ALLREDUCE"])
    x = torch.full((7,), float(me + 1))
    dist.all_reduce(x)
    report.check("all_reduce after the mismatch", x, torch.full((7,), w * (w + 1) / 2))
    return report


@pytest.mark.parametrize("world", [2, 3])
def test_detail_debug_mode(pools, world):
    pool = pools.get(world, env=DETAIL_ENV)
    assert_reports_pass(pool.run(detail_collectives), f"DETAIL debug mode, world {world}")
