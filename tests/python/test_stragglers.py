"""Issue 25: who is late. In a 4-rank job where rank 3 sleeps 20 ms before every collective,
torch_ring_backend.straggler_report names rank 3, late by 20 ms (within 25%), on every rank;
with nobody sleeping it names nobody. Each case runs on a group of its own, so that the pool's
earlier collectives are not in its report."""
import time

import pytest
import torch
import torch.distributed as dist

import torch_ring_backend

CALLS = 30
SLEEP_S = 0.020


def sleeper_case(ctx, sleeper):
    group = dist.new_group(backend="ring")
    t = torch.ones(256)
    for _ in range(CALLS):
        if ctx.rank == sleeper:
            time.sleep(SLEEP_S)
        dist.all_reduce(t, group=group)
    dist.barrier(group=group)  # every rank has issued the last all_reduce before the report
    dist.all_reduce(t, group=group)
    report = torch_ring_backend.straggler_report(group)
    dist.destroy_process_group(group)
    return report


@pytest.mark.parametrize("world", [4])
def test_a_rank_that_sleeps_before_every_collective_is_named(pool, world):
    for rank, r in enumerate(pool.run(sleeper_case, 3, timeout=120)):
        assert r["stragglers"] == [3], (rank, r)
        late = r["ranks"][3]
        assert abs(late["median_ms"] - 20.0) <= 5.0, (rank, late)
        assert late["last_in"] >= CALLS - 2, (rank, late)
        assert r["collectives"] >= CALLS, (rank, r)
        assert "rank 3 was the last to issue in" in r["text"], r["text"]
        for other in (0, 1, 2):
            assert r["ranks"][other]["median_ms"] < 5.0, (rank, r["ranks"])


@pytest.mark.parametrize("world", [4])
def test_without_a_sleeper_nobody_is_named(pool, world):
    for rank, r in enumerate(pool.run(sleeper_case, -1, timeout=120)):
        assert r["stragglers"] == [], (rank, r)
        assert r["collectives"] >= CALLS, (rank, r)
        assert "no rank was late by 1" in r["text"], r["text"]
