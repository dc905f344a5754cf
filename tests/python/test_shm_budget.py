"""Issue 70, item 1: a host's inboxes fit /dev/shm. Eight ranks run every collective in
Docker's default 64 MiB /dev/shm (a tmpfs of that size mounted in a mount namespace of their
own), TORCH_RING_SHM_BUDGET is kept, and below the floor every rank says what it needs."""
import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "shm_budget_worker.py")
MiB = 1024 * 1024
FIT_LINE = re.compile(r"rank (\d+) group '0' WARN\] shared memory: (\d+) local ranks take "
                      r"([\d.]+) MiB of /dev/shm .* with (\d+) slots of (\d+) KiB per FIFO")


def _run(nproc, env=None, shm_mib=None):
    command = [sys.executable, WORKER, str(nproc)]
    if shm_mib is not None:
        command = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                   f"mount -t tmpfs -o size={shm_mib}m tmpfs /dev/shm && exec \"$@\"", "sh",
                   *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def _small_dev_shm_possible():
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                            "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                           capture_output=True, text=True)
    return probe.returncode == 0, probe.stderr.strip()


def _result(run):
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    for rank, r in enumerate(result["ranks"]):
        assert r.get("failures") == [], (rank, r)
    return result


def test_eight_ranks_run_every_collective_in_dockers_default_dev_shm():
    possible, why = _small_dev_shm_possible()
    if not possible:
        pytest.skip(f"cannot mount a 64 MiB tmpfs over /dev/shm in a mount namespace: {why}")
    run = _run(8, shm_mib=64)
    result = _result(run)
    assert result["shm_size"] == 64 * MiB
    # Half of the space stays for others (the data loader's workers, torch's shared tensors).
    for r in result["ranks"]:
        assert r["free_during"] >= result["free_before"] // 2, result
    # One line, from the host's lowest rank, says what was chosen; it is what was taken.
    lines = FIT_LINE.findall(run.stderr)
    assert len(lines) == 1, run.stderr[-4000:]
    rank, local, taken_mib, slots, slot_kib = lines[0]
    assert (rank, local) == ("0", "8")
    taken = result["free_before"] - result["ranks"][0]["free_during"]
    assert abs(taken - float(taken_mib) * MiB) <= 0.05 * MiB, (taken, taken_mib)
    assert int(slots) >= 2 and int(slot_kib) >= 4


def test_the_budget_asked_for_is_kept_and_every_collective_runs():
    free_before = os.statvfs("/dev/shm").f_bavail * os.statvfs("/dev/shm").f_frsize
    run = _run(4, env={"TORCH_RING_SHM_BUDGET": "3MiB"})
    result = _result(run)
    lines = FIT_LINE.findall(run.stderr)
    assert len(lines) == 1, run.stderr[-4000:]
    assert float(lines[0][2]) <= 3.0
    assert "(TORCH_RING_SHM_BUDGET)" in run.stderr
    # Other jobs may use /dev/shm meanwhile: only the bound, not the exact figure, is checked.
    assert free_before - result["ranks"][0]["free_during"] <= 3 * MiB + MiB // 2


def test_below_the_floor_every_rank_says_what_it_needs():
    run = _run(4, env={"TORCH_RING_SHM_BUDGET": "200K"})
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = json.loads(run.stdout.strip().splitlines()[-1])["ranks"]
    for rank, r in enumerate(ranks):
        assert re.search(rf"ring: rank {rank} cannot set up its group: the shared-memory "
                         r"inboxes of 4 ranks on this host need at least \d+ bytes .* budget "
                         r"is 204800 bytes \(TORCH_RING_SHM_BUDGET", r["setup_error"]), r


def test_a_budget_that_is_not_a_size_is_refused():
    run = _run(2, env={"TORCH_RING_SHM_BUDGET": "lots"})
    assert run.returncode != 0
    assert "TORCH_RING_SHM_BUDGET='lots' must be auto or a size" in run.stderr, run.stderr[-3000:]
