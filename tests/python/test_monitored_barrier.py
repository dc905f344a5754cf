"""dist.monitored_barrier on ring, beside gloo's in the same job (torch's documentation: rank 0
waits for every rank within the timeout and raises naming the first that did not come, or all
of them with wait_all_ranks=True; the other ranks then fail too, rank 0 not having released
them). Each case runs the same calls on a ring group and a gloo group of the same ranks."""
import datetime
import inspect
import time

import pytest
import torch
import torch.distributed as dist

import torch_ring_backend  # noqa: F401  (registers "ring")
from torch_ring_backend._launch import run_on_local_ranks

_API = inspect.getsource(dist.monitored_barrier)
pytestmark = pytest.mark.skipif(
    "_device_types" not in _API,
    reason=f"torch {torch.__version__}'s dist.monitored_barrier takes gloo groups only (2.14 "
           "takes any group with a CPU backend)")


def _try(fn):
    start = time.monotonic()
    try:
        fn()
        return None, time.monotonic() - start
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}", time.monotonic() - start


def rank_monitored_barriers(timeout_s):
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    groups = {"ring": dist.new_group(backend="ring"), "gloo": dist.new_group(backend="gloo")}
    timeout = datetime.timedelta(seconds=timeout_s)
    result = {}
    for name, group in groups.items():
        # Every rank comes: passes everywhere.
        result[(name, "all")] = _try(lambda: dist.monitored_barrier(group, timeout=timeout))
        # The last rank stays away; wait_all_ranks: rank 0 names every missing rank (the last
        # two here). Each case on a fresh group, since a failed one leaves the ranks out of step.
    for name in ("ring", "gloo"):
        group = dist.new_group(backend=name)
        if rank != dist.get_world_size() - 1:
            result[(name, "one away")] = _try(
                lambda: dist.monitored_barrier(group, timeout=timeout))
        group = dist.new_group(backend=name)
        if rank < 1:
            result[(name, "two away, all named")] = _try(
                lambda: dist.monitored_barrier(group, timeout=timeout, wait_all_ranks=True))
    # Beyond gloo: ranks 0 and 1 have issued an all_reduce that rank 2 has not (it is late):
    # rank 0's error says rank 2 is behind. The all_reduce then times out (5 s) on ranks 0, 1.
    group = dist.new_group(backend="ring", timeout=datetime.timedelta(seconds=5))
    if rank < 2:
        work = dist.all_reduce(torch.ones(4), group=group, async_op=True)
        result[("ring", "behind")] = _try(lambda: dist.monitored_barrier(group, timeout=timeout))
        result[("ring", "behind: the all_reduce")] = _try(work.wait)
    time.sleep(timeout_s + 5)  # the absent ranks outlive the barriers they skipped
    dist.destroy_process_group()
    return result


def test_monitored_barrier_as_gloo_names_the_missing_ranks():
    timeout_s = 2
    results = run_on_local_ranks(rank_monitored_barriers, 3, timeout_s, timeout_s=180)
    for rank, res in enumerate(results):
        for backend in ("ring", "gloo"):
            error, took = res[(backend, "all")]
            assert error is None, (backend, rank, error)
    r0, r1 = results[0], results[1]
    for backend in ("ring", "gloo"):
        # Rank 0 names rank 2, within the timeout and a margin; rank 1 fails too.
        error, took = r0[(backend, "one away")]
        assert error is not None and "2" in error and took < timeout_s + 5, (backend, error, took)
        error1, took1 = r1[(backend, "one away")]
        assert error1 is not None and took1 < 2 * timeout_s + 5, (backend, error1, took1)
        # wait_all_ranks: both missing ranks named.
        error, took = r0[(backend, "two away, all named")]
        assert error is not None and "1" in error and "2" in error, (backend, error)
    # What ring says beyond gloo's words: the collective, the rank, the timeout.
    error, _ = r0[("ring", "one away")]
    assert "DistBackendError" in error, error
    for needle in ("monitored_barrier", "rank 2 did not reach it", f"{timeout_s * 1000} ms"):
        assert needle in error, (needle, error)
    error, _ = r0[("ring", "two away, all named")]
    assert "ranks 1, 2 did not reach it" in error, error
    error, _ = r1[("ring", "one away")]
    assert "rank 0 did not release it" in error, error
    error, _ = r0[("ring", "behind")]
    assert "rank 2 did not reach it" in error, error
    assert "Rank 2: it had issued 0 collective(s) of the group, rank 0 1: it is behind" in error, error
