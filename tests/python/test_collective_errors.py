"""Wrong sizes, invalid roots and lists of the wrong length: a clear error naming the collective,
raised on the calling rank before anything is queued; the group stays usable.

Every rank makes every bad call and each fails locally, so the ranks stay in step. Where only
the root can see the problem (a gather list), the other ranks pass a list too and torch's own
argument check stops them.
"""
import pytest
import torch
import torch.distributed as dist

from checks import Report, assert_reports_pass
from harness import WORLDS

GROUP_SIZE_MESSAGE = "tensors but the group has"


def wrong_sizes(ctx):
    report = Report()
    w, me, n = ctx.world, ctx.rank, 4
    report.check_raises("all_gather_into_tensor output too big",
                        lambda: dist.all_gather_into_tensor(torch.empty(w * n + 1), torch.ones(n)),
                        ["ring", "all_gather_into_tensor", "elements", str(w * n)])
    report.check_raises("all_gather_into_tensor dtype",
                        lambda: dist.all_gather_into_tensor(torch.empty(w * n, dtype=torch.int32),
                                                            torch.ones(n)),
                        ["ring", "all_gather_into_tensor", "dtype"])
    if w > 1:
        shared = torch.empty(w * n)
        other_block = shared.narrow(0, ((me + 1) % w) * n, n)
        report.check_raises("all_gather_into_tensor input is another rank's block",
                            lambda: dist.all_gather_into_tensor(shared, other_block),
                            ["ring", "all_gather_into_tensor", "overlaps"])
    report.check_raises("all_gather element size",
                        lambda: dist.all_gather([torch.empty(n + 1) for _ in range(w)],
                                                torch.ones(n)),
                        ["ring", "all_gather", "elements"])
    report.check_raises("reduce_scatter_tensor input size",
                        lambda: dist.reduce_scatter_tensor(torch.empty(n), torch.ones(w * n + 1)),
                        ["ring", "reduce_scatter_tensor", "elements"])
    report.check_raises("reduce_scatter element size",
                        lambda: dist.reduce_scatter(torch.empty(n),
                                                    [torch.ones(n + 1) for _ in range(w)]),
                        ["ring", "reduce_scatter", "elements"])
    report.check_raises("all_to_all_single split sizes",
                        lambda: dist.all_to_all_single(torch.empty(w), torch.ones(w),
                                                       [1] * w, [2] * w),
                        ["ring", "all_to_all_single", "split sizes"])
    if w > 1:
        report.check_raises("all_to_all_single rows not divisible",
                            lambda: dist.all_to_all_single(torch.empty(w + 1), torch.ones(w + 1)),
                            ["ring", "all_to_all_single", "not divisible"])
    _usable_afterwards(ctx, report)
    return report


def invalid_roots(ctx):
    report = Report()
    w = ctx.world
    for root in (w, -1):
        report.check_raises(f"broadcast src {root}",
                            lambda: dist.broadcast(torch.ones(3), src=root),
                            ["ring", "broadcast", "invalid root", str(root)])
    report.check_raises(f"reduce dst {w}", lambda: dist.reduce(torch.ones(3), dst=w),
                        ["ring", "reduce", "invalid root"])
    report.check_raises(f"gather dst {w}", lambda: dist.gather(torch.ones(3), None, dst=w),
                        ["ring", "gather", "invalid root"])
    report.check_raises(f"scatter src {w}", lambda: dist.scatter(torch.empty(3), None, src=w),
                        ["ring", "scatter", "invalid root"])
    _usable_afterwards(ctx, report)
    return report


def wrong_list_lengths(ctx):
    report = Report()
    w, me = ctx.world, ctx.rank
    # 0 is the "empty list" case of the bad-input matrix; w-1 is 0 when w is 1.
    for length in sorted({0, w - 1, w + 1}):
        report.check_raises(f"all_gather {length} outputs",
                            lambda: dist.all_gather([torch.empty(2) for _ in range(length)],
                                                    torch.ones(2)),
                            ["ring", "all_gather", GROUP_SIZE_MESSAGE])
        report.check_raises(f"reduce_scatter {length} inputs",
                            lambda: dist.reduce_scatter(torch.empty(2),
                                                        [torch.ones(2) for _ in range(length)]),
                            ["ring", "reduce_scatter", GROUP_SIZE_MESSAGE])
        if length == 0:
            continue  # torch itself refuses empty lists for all_to_all, gather and scatter
        report.check_raises(f"all_to_all {length} tensors",
                            lambda: dist.all_to_all([torch.empty(2) for _ in range(length)],
                                                    [torch.ones(2) for _ in range(length)]),
                            ["ring", "all_to_all", GROUP_SIZE_MESSAGE])
        tensors = [torch.empty(2) for _ in range(length)]
        if me == 0:
            report.check_raises(f"gather {length} outputs",
                                lambda: dist.gather(torch.ones(2), tensors, dst=0),
                                ["ring", "gather", GROUP_SIZE_MESSAGE])
            report.check_raises(f"scatter {length} inputs",
                                lambda: dist.scatter(torch.empty(2), tensors, src=0),
                                ["ring", "scatter", GROUP_SIZE_MESSAGE])
        else:
            report.check_raises("gather list on a non-root",
                                lambda: dist.gather(torch.ones(2), tensors, dst=0),
                                ["gather_list"], exception=ValueError)
            report.check_raises("scatter list on a non-root",
                                lambda: dist.scatter(torch.empty(2), tensors, src=0),
                                ["scatter_list"], exception=ValueError)
    _usable_afterwards(ctx, report)
    return report


def _usable_afterwards(ctx, report):
    x = torch.full((1009,), float(ctx.rank + 1))
    dist.all_reduce(x)
    report.check("all_reduce afterwards", x, torch.full((1009,), ctx.world * (ctx.world + 1) / 2))
    t = torch.full((5,), float(ctx.rank))
    dist.broadcast(t, src=ctx.world - 1)
    report.check("broadcast afterwards", t, torch.full((5,), float(ctx.world - 1)))


@pytest.mark.parametrize("world", WORLDS)
def test_wrong_sizes(pool, world):
    assert_reports_pass(pool.run(wrong_sizes), f"wrong sizes, world {world}")


@pytest.mark.parametrize("world", WORLDS)
def test_invalid_roots(pool, world):
    assert_reports_pass(pool.run(invalid_roots), f"invalid roots, world {world}")


@pytest.mark.parametrize("world", WORLDS)
def test_wrong_list_lengths(pool, world):
    assert_reports_pass(pool.run(wrong_list_lengths), f"wrong list lengths, world {world}")
