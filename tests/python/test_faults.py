"""Issue 6: faults end in clear errors on every rank, promptly, and leave nothing behind."""
import os
import re
import signal
import time

import pytest

from fault_launcher import finish, run_scenario, start

TIMEOUT_S = 3.0


def assert_dist_error(result, *fragments):
    assert result["error"] == "DistBackendError", result
    for f in fragments:
        assert f in result["message"], (f, result["message"])


def assert_timed_out_at_the_timeout(result, timeout_s):
    """Not before the timeout, and by the backend's own account ("timed out after N ms")
    within 250 ms after it: a deadline set longer than the timeout fails this."""
    assert result["elapsed"] >= timeout_s, result
    waited = re.search(r"timed out after (\d+) ms \(the timeout is (\d+) ms\)", result["message"])
    assert waited, result["message"]
    assert int(waited.group(2)) == int(timeout_s * 1000), result["message"]
    assert int(timeout_s * 1000) <= int(waited.group(1)) <= int(timeout_s * 1000) + 250, result


def test_timeout_names_collective_sequence_ranks_and_time():
    run = run_scenario("timeout", 2, timeout_s=TIMEOUT_S)
    first = run.by_rank()
    r0 = first[0]
    assert_dist_error(r0, "all_reduce", "sequence 0", "rank 0", "rank 1", "timed out",
                      f"the timeout is {int(TIMEOUT_S * 1000)} ms")
    # At the timeout: not earlier, and not later than the timeout plus 250 ms.
    assert_timed_out_at_the_timeout(r0, TIMEOUT_S)
    # Later collectives on the broken group fail fast, with the first failure as the cause.
    after = run.by_rank("after")[0]
    assert_dist_error(after, "timed out")
    assert after["elapsed"] < 1.0, after
    # The rank that never joined learns about it at its next collective instead of hanging.
    assert_dist_error(first[1], "broken", "timed out")
    assert first[1]["elapsed"] < 1.0, first[1]


def test_killed_rank_makes_survivors_fail_fast_naming_it():
    run = run_scenario("kill", 3, timeout_s=30.0)  # a long timeout: detection must not need it
    survivors = run.by_rank()
    assert sorted(survivors) == [0, 1], run.outputs
    for rank, r in survivors.items():
        assert_dist_error(r, "rank 2")
        assert "exited" in r["message"] or "gone" in r["message"], r
        assert r["elapsed"] < 5.0, r
        after = run.by_rank("after")[rank]
        assert_dist_error(after, "rank 2")
        assert after["elapsed"] < 1.0, after


def test_a_failed_works_future_fails_with_its_error_whenever_it_is_asked_for():
    # torch's contract (Work.get_future): the Future completes when the Work does, with its
    # value or its error; a Future asked for after completion is already completed.
    run = run_scenario("future_of_a_failed_work", 2, timeout_s=TIMEOUT_S)
    results = run.by_rank()
    assert sorted(results) == [0, 1], run.outputs
    for rank, r in results.items():
        by_label = {s["label"]: s for s in r["seen"]}
        assert sorted(by_label) == ["before", "chained", "next future", "next work", "work"], r
        assert by_label["next future"]["done"], r  # asked for after the Work completed
        for label, seen in by_label.items():
            # The Future's error is the Work's, whichever way it is reached; the next call
            # names the same cause (the group broke on it).
            assert seen["error"] is not None, (rank, label, r)
            assert "mismatch" in seen["message"] and "float64" in seen["message"], (rank, seen)
        assert by_label["work"]["error"] == "DistBackendError", r
        assert by_label["before"]["message"] == by_label["work"]["message"], r
        assert by_label["next future"]["message"] == by_label["next work"]["message"], r


@pytest.mark.parametrize("scenario, fragments", [
    ("mismatch_count", ["1000", "2000", "all_reduce", "sequence 0"]),
    ("mismatch_collective", ["all_reduce", "broadcast"]),
    ("mismatch_dtype", ["float32", "float64"]),
    ("mismatch_op", ["SUM", "MAX"]),
    ("mismatch_root", ["root 0", "root 1"]),
    ("mismatch_direct_bytes", ["all_reduce of 100 float32", "direct"]),
])
def test_mismatched_collectives_fail_on_every_rank(scenario, fragments):
    world = 3 if scenario == "mismatch_root" else 2
    run = run_scenario(scenario, world, timeout_s=TIMEOUT_S)
    results = run.by_rank()
    assert sorted(results) == list(range(world)), run.outputs
    detailed = 0
    messages = []
    for rank, r in results.items():
        if r["error"] is None and scenario == "mismatch_root":
            r = run.by_rank("after")[rank]  # a pure sender learns at its next collective
        assert r["error"] == "DistBackendError", r
        assert "mismatch" in r["message"], r
        detailed += all(f in r["message"] for f in fragments)
        messages.append(r["message"])
        # Well before the timeout: detection comes from the message headers.
        assert r["elapsed"] < TIMEOUT_S, r
    # At least one rank names both sides of the disagreement.
    assert detailed >= 1, messages


def test_a_receive_whose_send_never_comes_times_out_naming_the_peer():
    run = run_scenario("p2p_timeout", 2, timeout_s=TIMEOUT_S)
    r0 = run.by_rank()[0]
    assert r0["error"] is not None, r0
    for needle in ("recv from rank 1", "rank 0", "timed out", "never posted the matching send"):
        assert needle in r0["message"], r0
    assert_timed_out_at_the_timeout(r0, TIMEOUT_S)


def test_a_pending_receive_fails_fast_when_the_sender_dies():
    run = run_scenario("p2p_peer_killed", 2, timeout_s=30.0)
    results = run.by_rank()
    assert sorted(results) == [0], run.outputs
    r0 = results[0]
    assert r0["error"] is not None and "rank 1" in r0["message"], r0
    assert "exited" in r0["message"] or "gone" in r0["message"] or "closed" in r0["message"], r0
    assert r0["elapsed"] < 5.0, r0


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_a_rank_that_leaves_in_order_does_not_fail_the_others(transport):
    run = run_scenario("leave_early", 3, timeout_s=20.0, extra_env={"TORCH_RING_TRANSPORT": transport})
    results = run.by_rank()
    assert sorted(results) == [0, 1, 2], run.outputs
    for rank in (0, 1, 2):
        assert results[rank]["error"] is None, results[rank]
    assert results[1]["got"] == 1.0, results[1]


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_a_receive_from_a_rank_that_shut_down_in_order_fails_at_once(transport):
    run = run_scenario("p2p_peer_destroyed", 2, timeout_s=30.0,
                       extra_env={"TORCH_RING_TRANSPORT": transport})
    r1 = run.by_rank()[1]
    assert_dist_error(r1, "rank 0", "already shut down its process group")
    assert r1["elapsed"] < 5.0, r1


def test_abort_fails_pending_work_and_tells_peers():
    run = run_scenario("abort", 2, timeout_s=30.0)
    results = run.by_rank()
    assert_dist_error(results[0], "abort")
    assert results[0]["elapsed"] < 1.0, results[0]
    assert_dist_error(results[1], "abort")


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_destroy_leaves_no_threads_fds_or_shm(transport):
    # Three init/new_group/destroy cycles with p2p. The previous cycle's subgroup is still
    # referenced when the next cycle starts, which keeps torch's TCPStore (and its keys) alive:
    # each set-up must still see only its own keys (transport/setup_keys.h).
    run = run_scenario("cleanup", 2, timeout_s=10.0, extra_env={"TORCH_RING_TRANSPORT": transport})
    results = run.by_rank()
    assert sorted(results) == [0, 1], run.outputs
    for r in results.values():
        assert r["during"]["ring_threads"], r  # the count below can see our threads
        assert r["still_referenced"]["ring_threads"] == [], r
        assert r["still_referenced"]["shm"] == [], r
        assert r["after"]["shm"] == [], r
        assert r["after"]["fds"] <= r["before"]["fds"], r
        assert r["after"]["threads"] <= r["before"]["threads"], r


def _wait_for_ready(proc, rank, limit_s=60):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(f"READY {rank}"):
            return
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"rank {rank} never said READY")


def test_sigkill_of_every_rank_leaves_no_shm():
    before = {f for f in os.listdir("/dev/shm") if f.startswith("torch_ring_")}
    run = start("stress", 2, timeout_s=10.0)
    for rank, p in enumerate(run.procs):
        _wait_for_ready(p, rank)
        # Set up and busy: every rank maps its inbox and its peer's (unlinked from /dev/shm
        # already, so they show in the process's maps as deleted files).
        with open(f"/proc/{p.pid}/maps") as f:
            mapped = {line.split()[-2] for line in f if "torch_ring_" in line}
        assert len(mapped) >= 2, f"rank {rank} maps no ring segments: {mapped}"
    for p in run.procs:
        p.kill()
    finish(run, 10)
    left = {f for f in os.listdir("/dev/shm") if f.startswith("torch_ring_")} - before
    assert left == set()


def test_sigstopped_rank_times_out_others_then_errors_after_sigcont():
    run = start("sigstop", 2, timeout_s=TIMEOUT_S, stdin=True)
    stopped = run.procs[1]
    # Rank 1 says READY and then waits for a line on stdin: stopping it there is certain to
    # keep it out of the next collective, whatever the machine's load.
    _wait_for_ready(stopped, 1)
    os.kill(stopped.pid, signal.SIGSTOP)
    time.sleep(TIMEOUT_S + 1.5)
    os.kill(stopped.pid, signal.SIGCONT)
    stopped.stdin.write("go\n")
    stopped.stdin.flush()
    finish(run, 30)
    results = run.by_rank()
    assert_dist_error(results[0], "timed out", "rank 1")
    assert_timed_out_at_the_timeout(results[0], TIMEOUT_S)
    # Rank 1, let go after the others gave up, learns why at once instead of hanging.
    assert_dist_error(results[1], "broken", "timed out")
    assert results[1]["elapsed"] < 1.0, results[1]


def test_a_stopped_rank_on_the_same_host_is_named_within_seconds_not_at_the_timeout():
    """4 ranks on one host, group timeout 300 s, rank 2 stopped (SIGSTOP): every other rank
    raises within 10 s naming it (TORCH_RING_LINK_SILENCE_MS, 5 s by default: its heartbeat
    stopped), as a silent peer on another host is named."""
    run = start("frozen_peer", 4, timeout_s=300, stdin=True)
    frozen = run.procs[2]
    _wait_for_ready(frozen, 2)
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        for rank in (0, 1, 3):
            run.procs[rank].wait(timeout=60)
    finally:
        frozen.send_signal(signal.SIGCONT)
        frozen.kill()
    finish(run, 30)
    results = run.by_rank()
    for rank in (0, 1, 3):
        r = results[rank]
        assert r["error"] == "DistBackendError", r
        assert "rank 2 (pid" in r["message"] and "has not run for" in r["message"], r
        assert "stopped by a signal" in r["message"], r
        assert r["elapsed"] < 10, r


def test_a_late_but_live_rank_is_never_taken_for_frozen():
    """Rank 1 late by 2.5 x TORCH_RING_LINK_SILENCE_MS (2 s here), asleep in Python and then in
    a C call that holds the GIL: its heartbeat thread needs neither, so both calls succeed."""
    run = finish(start("late_but_live", 2, {"TORCH_RING_LINK_SILENCE_MS": "2000"},
                       timeout_s=60), 60)
    for phase in ("asleep in python", "in a C call holding the GIL"):
        for rank, r in run.every_rank(2, phase).items():
            assert r["error"] is None, (phase, rank, r)
    assert run.every_rank(2, "asleep in python")[0]["elapsed"] >= 4.5


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_a_group_name_reused_with_other_members_on_one_store(transport):
    run = run_scenario("regroup", 3, timeout_s=20.0, extra_env={"TORCH_RING_TRANSPORT": transport})
    results = run.by_rank()
    assert sorted(results) == [0, 1, 2], run.outputs
    # Members per cycle: [0, 1], [1, 2], [0, 1, 2], [0, 1]; rank r contributes r + 1.
    assert results[0]["sums"] == [3.0, 6.0, 3.0], results
    assert results[1]["sums"] == [3.0, 5.0, 6.0, 3.0], results
    assert results[2]["sums"] == [5.0, 6.0], results


def test_a_rank_whose_set_up_fails_ends_the_others_set_up_at_once():
    run = run_scenario("setup_failure", 2, timeout_s=120.0)
    results = run.by_rank()
    assert sorted(results) == [0, 1], run.outputs
    # Rank 1's own error is a usage error (RuntimeError) naming the bad setting.
    assert results[1]["error"] == "RuntimeError" and "bogus" in results[1]["message"], results[1]
    # Rank 0 names rank 1 and its reason, long before the 120 s timeout.
    assert_dist_error(results[0], "rank 1 failed to set up", "bogus")
    assert results[0]["elapsed"] < 10.0, results[0]


def test_use_after_destroy_is_a_clear_error():
    run = run_scenario("use_after_destroy", 2)
    for r in run.every_rank(2).values():
        assert r["error"] == "RuntimeError", r
        assert "ring: all_reduce on rank" in r["message"], r
        assert "after the process group was shut down" in r["message"], r


def test_flight_recorder_lists_last_collectives():
    run = run_scenario("flight_recorder", 2)
    for r in run.every_rank(2).values():
        entries = r["entries"]
        assert [e["collective"] for e in entries[-2:]] == ["all_reduce", "broadcast"], entries
        assert [e["seq"] for e in entries] == sorted(e["seq"] for e in entries)
        assert all(e["state"] == "completed" for e in entries), entries
        assert "7 x float32" in entries[-1]["detail"] and "root 0" in entries[-1]["detail"], entries[-1]


def test_flight_recorder_keeps_torch_fr_buffer_size_entries():
    # TORCH_FR_BUFFER_SIZE is torch's knob for its recorders' length; 6 collectives, 3 kept.
    run = run_scenario("flight_recorder", 2, extra_env={"TORCH_FR_BUFFER_SIZE": "3"})
    for r in run.every_rank(2).values():
        entries = r["entries"]
        assert len(entries) == 3, entries
        assert [e["collective"] for e in entries] == ["all_reduce", "all_reduce", "broadcast"], entries


def test_torch_fr_buffer_size_zero_turns_the_flight_recorder_off():
    # torch documents TORCH_FR_BUFFER_SIZE=0 as "off" for its recorder (and NCCL's): the group
    # sets up and runs, and keeps no entries.
    run = run_scenario("flight_recorder", 2, extra_env={"TORCH_FR_BUFFER_SIZE": "0"})
    for r in run.every_rank(2).values():
        assert r["entries"] == [], r["entries"]


@pytest.mark.parametrize("level", ["TRACE", "trace"])  # any case, as NCCL_DEBUG
def test_debug_logging_info_and_trace(level):
    run = run_scenario("debug_log", 2, extra_env={"TORCH_RING_DEBUG": level})
    text = "\n".join(run.outputs)
    assert "ring order 0 -> 1" in text, text
    assert "shared memory" in text, text
    assert "all_reduce (sequence 0) took" in text, text


@pytest.mark.slow
def test_stress_many_small_collectives_memory_and_files_flat():
    run = run_scenario("stress", 2, limit_s=240, timeout_s=30.0)
    for r in run.every_rank(2).values():
        assert r["values_ok"], r["problems"]
        assert r["after"]["fds"] <= r["before"]["fds"], r
        assert r["after"]["threads"] <= r["before"]["threads"], r
        # RSS may wobble by allocator noise, not grow with the number of collectives.
        assert r["after"]["rss_kb"] - r["before"]["rss_kb"] < 20 * 1024, r
