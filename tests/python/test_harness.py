"""The harness itself: values come back per rank, a raising rank's traceback comes back, and a
case that never finishes fails within its time limit and leaves a working pool behind."""
import time

import pytest
import torch
import torch.distributed as dist

from harness import CaseFailed, CaseTimeout


def identity(ctx, payload):
    return ctx.rank, ctx.world, dist.get_backend(), dist.get_backend(ctx.gloo), payload


def raise_on_rank_one(ctx):
    if ctx.rank == 1:
        raise ValueError("deliberate failure on rank 1")
    return ctx.rank


def sleep_forever(ctx):
    time.sleep(3600)


@pytest.mark.parametrize("world", [2])
def test_values_come_back_in_rank_order(pool, world):
    payload = torch.arange(5)
    values = pool.run(identity, payload)
    assert [v[:4] for v in values] == [(r, world, "ring", "gloo") for r in range(world)]
    assert all(torch.equal(v[4], payload) for v in values)


@pytest.mark.parametrize("world", [2])
def test_a_raising_rank_reports_its_traceback(pool, world):
    with pytest.raises(CaseFailed, match=r"(?s)ranks \[1\].*deliberate failure on rank 1"):
        pool.run(raise_on_rank_one)
    assert pool.run(identity, None)[1][0] == 1  # a fresh pool serves the next case


@pytest.mark.parametrize("world", [2])
def test_a_hung_case_times_out_and_the_pool_recovers(pool, world):
    start = time.monotonic()
    with pytest.raises(CaseTimeout, match=r"ranks \[0, 1\] did not finish within 2"):
        pool.run(sleep_forever, timeout=2)
    assert time.monotonic() - start < 15
    assert [v[0] for v in pool.run(identity, None)] == [0, 1]
