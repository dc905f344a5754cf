"""Rooted collectives and barrier: broadcast, reduce, gather and scatter from every root, over
edge sizes and element sizes 1, 2, 4 and 8, against closed forms built from each rank's
deterministic input."""
import time

import pytest
import torch
import torch.distributed as dist

from checks import Report, assert_reports_pass
from harness import WORLDS
from reference import (
    dtype_from_name, dtype_name, exact_input, expected_reduction, payload, premul_factor,
    reduce_op,
)

# One dtype per element size, plus bool.
MOVE_DTYPES = (torch.uint8, torch.bfloat16, torch.float32, torch.int64, torch.bool)


def move_sizes(world):
    """0, 1, not divisible by the world size, prime, and larger than the transport FIFO."""
    return sorted({0, 1, world + 1, 1009, 2**19})


# ---- cases -------------------------------------------------------------------------------------


def broadcast_every_root(ctx):
    report = Report()
    for dtype in MOVE_DTYPES:
        for root in range(ctx.world):
            for n in move_sizes(ctx.world):
                t = payload(ctx.rank, n, dtype)  # non-roots start with other data
                dist.broadcast(t, src=root)
                report.check(f"{dtype_name(dtype)} root {root} n={n}", t, payload(root, n, dtype))
    # A 2-D tensor, and gloo as a second reference.
    t = payload(ctx.rank, 33, torch.float32, shape_tail=(5,))
    ref = t.clone()
    dist.broadcast(t, src=ctx.world - 1)
    dist.broadcast(ref, src=ctx.world - 1, group=ctx.gloo)
    report.check("float32 [33, 5] vs gloo", t, ref)
    return report


def reduce_every_root(ctx, dtype_str):
    dtype = dtype_from_name(dtype_str)
    ops = ["SUM", "AVG", "MAX", "MIN", "PRODUCT", "PREMUL_SUM"]
    if not dtype.is_floating_point:
        ops.append("BOR")
    report = Report()
    for op in ops:
        factor = premul_factor(dtype) if op == "PREMUL_SUM" else None
        for root in range(ctx.world):
            for n in (0, 1, ctx.world + 1, 1009) + ((2**18,) if op == "SUM" else ()):
                inputs = [exact_input(r, n, dtype, op, seed=root) for r in range(ctx.world)]
                t = inputs[ctx.rank].clone()
                dist.reduce(t, dst=root, op=reduce_op(op, factor))
                if ctx.rank == root:  # only the root's tensor holds the result
                    report.check(f"{op} root {root} n={n}", t,
                                 expected_reduction(inputs, op, dtype, factor),
                                 same_on_all_ranks=False)
    return report


def gather_every_root(ctx):
    report = Report()
    for dtype in MOVE_DTYPES:
        for root in range(ctx.world):
            for n in move_sizes(ctx.world):
                mine = payload(ctx.rank, n, dtype, seed=root)
                gathered = [torch.empty(n, dtype=dtype) for _ in range(ctx.world)]
                dist.gather(mine, gathered if ctx.rank == root else None, dst=root)
                if ctx.rank == root:
                    for r in range(ctx.world):
                        report.check(f"{dtype_name(dtype)} root {root} n={n} from {r}",
                                     gathered[r], payload(r, n, dtype, seed=root),
                                     same_on_all_ranks=False)
                if not hasattr(dist, "gather_single"):  # torch 2.14's
                    continue
                # Into one tensor on the root, flat (between guard elements that must stay
                # untouched) and stacked [world, n]: torch documents both layouts.
                want = torch.cat([payload(r, n, dtype, seed=root) for r in range(ctx.world)])
                guarded = payload(ctx.rank, ctx.world * n + 16, dtype, seed=99)
                before = guarded.clone()
                flat = guarded[8:8 + ctx.world * n]
                dist.gather_single(mine, flat if ctx.rank == root else None, dst=root)
                stacked = torch.empty(ctx.world, n, dtype=dtype)
                dist.gather_single(mine, stacked if ctx.rank == root else None, dst=root)
                if ctx.rank == root:
                    label = f"{dtype_name(dtype)} root {root} n={n} gather_single"
                    report.check(f"{label} flat", flat, want, same_on_all_ranks=False)
                    report.check(f"{label} stacked", stacked.flatten(), want,
                                 same_on_all_ranks=False)
                report.check(f"{dtype_name(dtype)} root {root} n={n} gather_single guards",
                             torch.cat([guarded[:8], guarded[8 + ctx.world * n:]]),
                             torch.cat([before[:8], before[8 + ctx.world * n:]]),
                             same_on_all_ranks=False)
    return report


def scatter_every_root(ctx):
    report = Report()
    for dtype in MOVE_DTYPES:
        for root in range(ctx.world):
            for n in move_sizes(ctx.world):
                # The root sends payload(root, seed=dst) to each dst.
                parts = None
                if ctx.rank == root:
                    parts = [payload(root, n, dtype, seed=dst) for dst in range(ctx.world)]
                out = torch.empty(n, dtype=dtype)
                dist.scatter(out, parts, src=root)
                report.check(f"{dtype_name(dtype)} root {root} n={n}", out,
                             payload(root, n, dtype, seed=ctx.rank), same_on_all_ranks=False)
    return report


def barrier_waits_for_everyone(ctx):
    # The last rank arrives late; nobody may leave the barrier before it arrived.
    if ctx.rank == ctx.world - 1:
        time.sleep(0.5)
    arrived = time.time()
    # Queued behind a large async all_reduce: the barrier must also wait for that.
    big = torch.ones(2**20)
    work = dist.all_reduce(big, async_op=True)
    dist.barrier()
    return {"arrived": arrived, "left": time.time(), "earlier_work_done": work.is_completed(),
            "sum_ok": bool((big == ctx.world).all())}


# ---- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("world", WORLDS)
def test_broadcast_from_every_root(pool, world):
    assert_reports_pass(pool.run(broadcast_every_root), f"broadcast, world {world}")


@pytest.mark.parametrize("dtype_str", ["float32", "bfloat16", "int32"])
@pytest.mark.parametrize("world", WORLDS)
def test_reduce_to_every_root(pool, world, dtype_str):
    assert_reports_pass(pool.run(reduce_every_root, dtype_str), f"reduce {dtype_str}, world {world}")


@pytest.mark.parametrize("world", WORLDS)
def test_gather_to_every_root(pool, world):
    assert_reports_pass(pool.run(gather_every_root), f"gather, world {world}")


@pytest.mark.parametrize("world", WORLDS)
def test_scatter_from_every_root(pool, world):
    assert_reports_pass(pool.run(scatter_every_root), f"scatter, world {world}")


@pytest.mark.parametrize("world", WORLDS)
def test_barrier_waits_for_every_rank_and_earlier_work(pool, world):
    results = pool.run(barrier_waits_for_everyone)
    last_arrival = max(r["arrived"] for r in results)
    for rank, r in enumerate(results):
        assert r["left"] >= last_arrival, f"rank {rank} left the barrier before rank {world - 1} arrived"
        assert r["earlier_work_done"], f"rank {rank}: barrier returned before earlier all_reduce"
        assert r["sum_ok"], f"rank {rank}"
