"""ProcessGroup.merge_remote_group (c10d::Backend::merge) on "ring", beside gloo on the same
ranks: two groups of two merge into one of four, whose collectives hold their closed forms."""
import pytest

from merge_checks import rank_merge_two_halves
from torch_ring_backend._launch import run_on_local_ranks


@pytest.mark.parametrize("backend", ["ring", "gloo"])
def test_two_groups_merge_into_one_of_four(backend):
    results = run_on_local_ranks(rank_merge_two_halves, 4, backend, timeout_s=180)
    assert sorted(r["rank"] for r in results) == [0, 1, 2, 3], results
    for me, r in enumerate(results):
        assert r["size"] == 4, r
        assert r["sum"] == 10.0, r  # 1 + 2 + 3 + 4
        assert r["half_sum"] == 2.0, r
        assert r["gathered"][r["rank"]] == me, r
        assert sorted(r["gathered"]) == [0, 1, 2, 3], r
        assert r["gathered"] == results[0]["gathered"], (me, r, results[0])
        assert r["backend"] == backend, r
