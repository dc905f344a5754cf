"""all_to_all (tensor lists) and all_to_all_single (equal and uneven split sizes): every block
must land at its destination, checked against a closed form and against gloo."""
import pytest
import torch
import torch.distributed as dist

from checks import Report, assert_reports_pass
from harness import WORLDS
from reference import dtype_name, payload
from test_collectives import MOVE_DTYPES


def uneven_rows(src, dst):
    """How many rows `src` sends to `dst`: 0 to 3, differing by pair."""
    return (src * 2 + dst * 3 + src * dst) % 4


def _block(src, dst, rows, dtype, tail=()):
    # What `src` sends to `dst`: every (src, dst) pair carries different data.
    return payload(src, rows, dtype, seed=dst, shape_tail=tail)


def all_to_all_lists(ctx):
    report = Report()
    w, me = ctx.world, ctx.rank
    for dtype in MOVE_DTYPES:
        for name, rows in (("uneven", uneven_rows), ("equal 2**16", lambda s, d: 2**16)):
            sends = [_block(me, dst, rows(me, dst), dtype) for dst in range(w)]
            received = [torch.empty(rows(src, me), dtype=dtype) for src in range(w)]
            dist.all_to_all(received, sends)
            for src in range(w):
                report.check(f"{dtype_name(dtype)} {name} from {src}", received[src],
                             _block(src, me, rows(src, me), dtype), same_on_all_ranks=False)
    return report


def all_to_all_single_splits(ctx):
    report = Report()
    w, me = ctx.world, ctx.rank
    tail = (3,)
    for dtype in MOVE_DTYPES:
        for k in (0, 1, 5, 2**15):  # equal splits: k rows to every rank
            given = torch.cat([_block(me, dst, k, dtype, tail) for dst in range(w)])
            out = torch.empty(w * k, *tail, dtype=dtype)
            dist.all_to_all_single(out, given)
            want = torch.cat([_block(src, me, k, dtype, tail) for src in range(w)])
            report.check(f"{dtype_name(dtype)} equal k={k}", out, want, same_on_all_ranks=False)
        send_rows = [uneven_rows(me, dst) for dst in range(w)]
        recv_rows = [uneven_rows(src, me) for src in range(w)]
        given = torch.cat([_block(me, dst, send_rows[dst], dtype, tail) for dst in range(w)])
        want = torch.cat([_block(src, me, recv_rows[src], dtype, tail) for src in range(w)])
        out = torch.empty(sum(recv_rows), *tail, dtype=dtype)
        dist.all_to_all_single(out, given, recv_rows, send_rows)
        report.check(f"{dtype_name(dtype)} uneven", out, want, same_on_all_ranks=False)
        ref = torch.empty_like(out)
        dist.all_to_all_single(ref, given, recv_rows, send_rows, group=ctx.gloo)
        report.check(f"{dtype_name(dtype)} uneven vs gloo", out, ref, same_on_all_ranks=False)
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_all_to_all_lists(pool, world):
    assert_reports_pass(pool.run(all_to_all_lists), f"all_to_all, world {world}")


@pytest.mark.parametrize("world", WORLDS)
def test_all_to_all_single_equal_and_uneven(pool, world):
    assert_reports_pass(pool.run(all_to_all_single_splits), f"all_to_all_single, world {world}")
