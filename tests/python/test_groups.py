"""Subgroups made with new_group on the ring backend: a group that leaves ranks out, ranks in
two groups at once, and collectives on different groups interleaved (asynchronously, and in a
different order on different ranks: each group must progress on its own)."""
import pytest
import torch
import torch.distributed as dist

from checks import Report, assert_reports_pass
from harness import WORLDS
from reference import payload


def _make_groups(world):
    """Every rank must call new_group for every group, members or not, in the same order."""
    specs = {
        "everyone": list(range(world)),
        "all_but_first": list(range(1, world)),
        "evens": [r for r in range(world) if r % 2 == 0],
        "odds": [r for r in range(world) if r % 2 == 1],
        "first_two": [0, 1],
    }
    specs = {name: ranks for name, ranks in specs.items() if 0 < len(ranks) <= world and
             max(ranks) < world}
    return {name: (ranks, dist.new_group(ranks)) for name, ranks in specs.items()}


def _filled(rank, n=1009):
    return torch.full((n,), float(rank + 1))


def subgroup_collectives(ctx):
    report = Report()
    me = ctx.rank
    groups = _make_groups(ctx.world)
    for name, (ranks, group) in groups.items():
        x = _filled(me)
        if me not in ranks:
            # torch skips the call on a non-member: the tensor must come back untouched.
            dist.all_reduce(x, group=group)
            report.check(f"{name}: non-member untouched", x, _filled(me), same_on_all_ranks=False)
            continue
        if dist.get_backend(group) != "ring":
            report.failures.append(f"{name}: backend is {dist.get_backend(group)}, not ring")
        dist.all_reduce(x, group=group)
        report.check(f"{name}: all_reduce", x, torch.full((1009,), float(sum(r + 1 for r in ranks))),
                     same_on_all_ranks=False)
        src = ranks[-1]  # a global rank, which torch maps to its rank in the group
        t = payload(me, 77, torch.float32)
        dist.broadcast(t, src=src, group=group)
        report.check(f"{name}: broadcast from global rank {src}", t, payload(src, 77, torch.float32),
                     same_on_all_ranks=False)
        out = torch.empty(len(ranks) * 5, dtype=torch.int64)
        dist.all_gather_into_tensor(out, payload(me, 5, torch.int64), group=group)
        report.check(f"{name}: all_gather_into_tensor", out,
                     torch.cat([payload(r, 5, torch.int64) for r in ranks]), same_on_all_ranks=False)
        position = ranks.index(me)
        given = torch.arange(len(ranks) * 3, dtype=torch.float32) + me
        out = torch.empty(3)
        dist.reduce_scatter_tensor(out, given, group=group)
        base = torch.arange(len(ranks) * 3, dtype=torch.float32)
        want = (base * len(ranks) + sum(ranks))[position * 3:(position + 1) * 3]
        report.check(f"{name}: reduce_scatter_tensor", out, want, same_on_all_ranks=False)
    _interleaved(ctx, report, groups)
    for ranks, group in groups.values():
        if me in ranks:
            dist.destroy_process_group(group)
    return report


def _interleaved(ctx, report, groups):
    """Async all_reduces on every group of this rank, issued in an order that differs by rank
    (reversed on odd ranks), with a world all_reduce in the middle."""
    me = ctx.rank
    mine = [(name, ranks, group) for name, (ranks, group) in groups.items() if me in ranks]
    if me % 2:
        mine.reverse()
    pending = []
    for round_ in range(3):
        for name, ranks, group in mine:
            x = _filled(me, 2**16) * (round_ + 1)
            pending.append((f"{name} round {round_}", x, dist.all_reduce(x, group=group,
                                                                         async_op=True),
                            float(sum(r + 1 for r in ranks) * (round_ + 1))))
        world_x = _filled(me, 100)
        world_work = dist.all_reduce(world_x, async_op=True)
        pending.append((f"world round {round_}", world_x, world_work,
                        float(ctx.world * (ctx.world + 1) / 2)))
    for label, x, work, total in pending:
        work.wait()
        report.check(f"interleaved {label}", x, torch.full_like(x, total), same_on_all_ranks=False)


@pytest.mark.parametrize("world", WORLDS)
def test_subgroups(pool, world):
    assert_reports_pass(pool.run(subgroup_collectives), f"subgroups, world {world}")
