"""torch 2.15's Backend calls that gloo and NCCL answer, on "ring" (torch215_checks.py): abort
hooks (supportsAbortHooks, registered by id, run on abort() and when a failed call breaks the
group), keyed completion hooks (supportsCompletionHooks, one call per successful Work with its
getCompletionKey) and addEphemeralTimeout (a call's timeout lengthened until the first call created after
it ends). Skipped before torch 2.15; run by scripts/torch_matrix.sh's 2.15 step."""
import pytest
import torch

from torch_ring_backend._launch import run_on_local_ranks

pytestmark = pytest.mark.skipif(
    tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 15),
    reason="torch 2.15's Backend calls (scripts/torch_matrix.sh runs this with torch 2.15)")

from torch215_checks import (  # noqa: E402
    rank_abort_hooks_run_on_abort, rank_abort_hooks_run_when_a_call_fails,
    rank_completion_hooks, rank_ephemeral_timeout)


def test_abort_runs_the_registered_abort_hooks_once():
    for rank, res in enumerate(run_on_local_ranks(rank_abort_hooks_run_on_abort, 2,
                                                  timeout_s=120)):
        assert res["supported"] is True, (rank, res)
        assert res["ran"] == [7], (rank, res)


def test_a_failed_call_runs_the_abort_hooks_before_its_error_is_raised():
    r0, r1 = run_on_local_ranks(rank_abort_hooks_run_when_a_call_fails, 2, 2, timeout_s=120)
    assert r0["error"] and "timed out" in r0["error"], r0
    assert r0["ran"] == 1, r0


def test_an_ephemeral_timeout_lengthens_calls_until_the_first_one_after_it_ends():
    timeout_s, late_s, extra_s = 2, 3.5, 4
    r0, r1 = run_on_local_ranks(rank_ephemeral_timeout, 2, timeout_s, late_s, extra_s,
                                timeout_s=120)
    first, second = r0["outcomes"]
    assert first[0] == "ok" and first[1] >= late_s - 0.5 and first[2] == 2.0, r0
    assert second[0] == "DistBackendError" and "timed out" in second[2], r0
    assert timeout_s <= second[1] < timeout_s + 1.5, r0


def test_completion_hooks_hear_each_successful_work_once_by_its_key():
    results = run_on_local_ranks(rank_completion_hooks, 2, timeout_s=120)
    for rank, res in enumerate(results):
        assert res["supported"] is True, (rank, res)
        keys, heard = res["keys"], res["heard_keys"]
        assert len(set(keys)) == len(keys), (rank, res)  # every Work its own key
        for k in keys:
            assert heard.count(k) == 1, (rank, k, res)
        assert all(ms is not None and ms >= 0 for ms in res["timed"]), (rank, res)
        # Beside them: the coalesced block, whose two all_reduces torch folds into one
        # allreduce_coalesced (one held call, then the block's task), and the barrier.
        assert res["heard_others"] == 3, (rank, res)
        assert res["after_unregister"] == res["heard_before_unregister"], (rank, res)
        assert res["heard_for_failed"] == [], (rank, res)
    # Rank 0's lone all_reduce timed out (the failure whose key hook 12 did not hear).
    assert results[0]["failed"] == "DistBackendError", results[0]
