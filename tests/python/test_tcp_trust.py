"""The job's secret on the TCP path, end to end in separate processes under the environment a
user sets (issue 16): TORCH_RING_SECRET / TORCH_RING_SECRET_FILE must agree on every rank,
a disagreement fails set-up on every rank naming the rank that did not prove the key, and a
secret file others can read is refused. (The handshake, the source-address check and the
closed listener are tested in C++: tests/cpp/test_tcp_strangers.cc.)"""
import os

import pytest

from fault_launcher import run_scenario

TCP = {"TORCH_RING_TRANSPORT": "tcp"}


def secret_run(secrets, extra=None):
    env = dict(TCP, RING_TEST_SECRETS=",".join(secrets))
    env.update(extra or {})
    run = run_scenario("secret", len(secrets), limit_s=60, extra_env=env, timeout_s=60.0)
    results = run.by_rank()
    assert sorted(results) == list(range(len(secrets))), run.outputs
    return results


def test_ranks_that_share_a_secret_work():
    for r in secret_run(["s3cret", "s3cret", "s3cret"]).values():
        assert r["error"] is None, r


@pytest.mark.parametrize("secrets", [["s3cret", "other"], ["", "s3cret"], ["s3cret", ""]],
                         ids=["different", "only-rank-1", "only-rank-0"])
def test_ranks_that_disagree_fail_at_set_up_naming_the_rank(secrets):
    results = secret_run(secrets)
    # Rank 0 connects to rank 1 and checks its proof first; rank 1 learns it from rank 0's
    # notice in the store, long before the 60 s timeout.
    for r in results.values():
        assert r["error"] is not None, r
        assert "rank 1 did not prove the job's key" in r["message"], r
        assert "TORCH_RING_SECRET" in r["message"], r
        assert r["elapsed"] < 20.0, r
    assert "rank 0 failed to set up" in results[1]["message"], results[1]


def test_secret_file_is_read_and_must_be_private(tmp_path):
    path = tmp_path / "secret"
    path.write_text("from a file\n")
    os.chmod(path, 0o600)
    # The file's secret is its text less one trailing newline: a rank given the file and a rank
    # given the same text in TORCH_RING_SECRET agree.
    for r in secret_run([f"file:{path}", "from a file"]).values():
        assert r["error"] is None, r
    # ...and the newline is the only thing dropped.
    for r in secret_run([f"file:{path}", "from a fil"]).values():
        assert "rank 1 did not prove the job's key" in (r["message"] or ""), r
    os.chmod(path, 0o644)
    for r in secret_run([f"file:{path}", f"file:{path}"]).values():
        assert r["error"] is not None, r
        assert f"TORCH_RING_SECRET_FILE='{path}' has mode 0644" in r["message"], r
        assert "chmod 600" in r["message"], r


def test_both_secret_knobs_set_is_refused(tmp_path):
    path = tmp_path / "secret"
    path.write_text("x")
    os.chmod(path, 0o600)
    for r in secret_run(["a", "a"], {"TORCH_RING_SECRET_FILE": str(path)}).values():
        assert r["error"] is not None, r
        assert "TORCH_RING_SECRET and TORCH_RING_SECRET_FILE are both set" in r["message"], r
