"""A cut link or a frozen host is named on every rank within seconds, whatever the group's
timeout; a rank that is merely late is waited for (TORCH_RING_LINK_SILENCE_MS, default 5000).

Two "hosts" (network namespaces joined by a veth pair, test_multihost.py's fixture), two ranks
each, started directly with env:// (torchrun's agents would themselves hang on a cut or frozen
rendezvous store), every rank in a loop of 64 KiB all_reduces checked against their closed
form, with a group timeout of 300 s:

- the link is cut silently (iptables drops every packet both ways, no reset), as when a switch
  or cable fails: every rank, on both sides, must raise within 10 s of the cut, naming a rank of
  the other host and its address;
- every process of host B is stopped (SIGSTOP): its kernel still acknowledges TCP, so only the
  missing heartbeats of its ranks' I/O threads tell; both ranks of host A must raise within
  10 s naming host B's ranks and address;
- the ranks of host B sleep 20 s before one collective, under a 60 s timeout: nobody may be
  flagged, every result is right, and the job ends in order.

Needs root (ip netns, iptables); skipped with the reason where namespaces cannot be created.
"""
import json
import os
import pickle
import signal
import subprocess
import sys
import time

import pytest

from test_multihost import REPO, WORKER, _free_port_in, _run, hosts  # noqa: F401 (fixture)

GROUP_TIMEOUT_S = 300
# The default bound is 5 s; the goal is "named within 10 s of the fault".
NAMED_WITHIN_S = 10
PLACEMENT = ([0, 1], [2, 3])


def _start(hosts, shared, late_s, timeout_s, extra_env=None):
    """Each host's ranks from one shell inside one IPC namespace (shared memory between them,
    TCP to the other host); returns the two shells' Popen objects."""
    port = _free_port_in(hosts.ns[0])
    procs = []
    for i in range(2):
        env = dict(os.environ, WORLD_SIZE="4", MASTER_ADDR=hosts.ip[0], MASTER_PORT=str(port),
                   RING_MH_DIR=shared, GLOO_SOCKET_IFNAME=hosts.dev[i],
                   PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   OMP_NUM_THREADS="1", **(extra_env or {}))
        env.pop("TORCH_RING_LINK_SILENCE_MS", None)  # the default is what is tested
        starts = " ".join(f"RANK={r} {sys.executable} {WORKER} liveness {timeout_s} {late_s} "
                          f"& p{r}=$!;" for r in PLACEMENT[i])
        waits = " ".join(f"wait $p{r} || rc=1;" for r in PLACEMENT[i])
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", hosts.ns[i], "unshare", "--ipc", "sh", "-c",
             f"rc=0; {starts} {waits} exit $rc"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True))  # one process group per host: killed whole (_kill)
    return procs


def _kill(p):
    """The host's shell and its ranks (a rank left behind would hold the output pipe open)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait_running(shared, procs):
    deadline = time.time() + 90
    while not all(os.path.exists(os.path.join(shared, f"running.{r}")) for r in range(4)):
        if time.time() > deadline or any(p.poll() is not None for p in procs):
            for p in procs:
                _kill(p)
            pytest.fail("the ranks did not start:\n" + "".join(p.communicate()[0] for p in procs))
        time.sleep(0.1)
    time.sleep(0.5)  # a few calls into the loop
    open(os.path.join(shared, "fault"), "w").close()


def _collect(procs, wait_s, shared):
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=wait_s)[0])
        except subprocess.TimeoutExpired:
            _kill(p)
            outputs.append(p.communicate()[0] + "\n[hung: killed]")
    text = "\n".join(outputs)
    results = {}
    for r in range(4):
        path = os.path.join(shared, f"result.{r}")
        if os.path.exists(path):
            with open(path) as f:
                results[r] = json.load(f)
    return results, text


def _assert_named(r, other_ranks, other_ip):
    # The rank that saw the silence names it; the others of its host learn it through the
    # group's break, with the first reason (which is the same text).
    assert r["error"] == "DistBackendError", r
    m = r["message"]
    assert "has sent nothing for" in m, r
    assert any(f"rank {p} ({other_ip}:" in m for p in other_ranks), r
    assert f"its host ({other_ip}) is down or frozen" in m, r
    assert 0 < r["since_fault"] <= NAMED_WITHIN_S, r
    # The straggler report, which lateness alone would leave silent about a rank that is gone,
    # ends with the same failure.
    assert "; the group failed at all_reduce #" in r["stragglers"], r
    assert "has sent nothing for" in r["stragglers"], r


def test_a_cut_link_is_named_on_every_rank_within_seconds(hosts, tmp_path):
    shared = str(tmp_path)
    procs = _start(hosts, shared, 0, GROUP_TIMEOUT_S)
    rules = []
    try:
        _wait_running(shared, procs)
        for ns, peer in zip(hosts.ns, reversed(hosts.ip)):
            for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
                rule = [chain, flag, peer, "-j", "DROP"]
                _run("ip", "netns", "exec", ns, "iptables", "-I", *rule)
                rules.append((ns, rule))
        results, text = _collect(procs, NAMED_WITHIN_S + 50, shared)
    finally:
        for ns, rule in rules:
            _run("ip", "netns", "exec", ns, "iptables", "-D", *rule, check=False)
        for p in procs:
            _kill(p)
    print("\n".join(f"rank {r}: {v['since_fault']:.1f} s after the cut: {v['message']}"
                    for r, v in sorted(results.items()) if v["since_fault"] is not None))
    assert sorted(results) == [0, 1, 2, 3], text[-6000:]
    for rank, r in results.items():
        other = 1 if rank in PLACEMENT[0] else 0
        _assert_named(r, PLACEMENT[other], hosts.ip[other])


def _netns_pids(ns):
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_a_frozen_host_is_named_on_every_other_rank_within_seconds(hosts, tmp_path):
    shared = str(tmp_path)
    dumps = tmp_path / "fr"
    dumps.mkdir()
    procs = _start(hosts, shared, 0, GROUP_TIMEOUT_S,
                   {"TORCH_FR_DUMP_TEMP_FILE": str(dumps / "rank_")})
    frozen = []
    try:
        _wait_running(shared, procs)
        # Every process of host B, its shell and its ranks (their I/O threads included).
        frozen = _netns_pids(hosts.ns[1])
        assert len(frozen) >= 3, frozen
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        results, text = _collect(procs[:1], NAMED_WITHIN_S + 50, shared)
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in procs:
            _kill(p)
        procs[1].communicate()
    print("\n".join(f"rank {r}: {v['since_fault']:.1f} s after the freeze: {v['message']}"
                    for r, v in sorted(results.items()) if v["since_fault"] is not None))
    assert sorted(results) == PLACEMENT[0], text[-6000:]
    for r in results.values():
        _assert_named(r, PLACEMENT[1], hosts.ip[1])
    # Each failed rank wrote its flight recorder's dump (TORCH_FR_DUMP_TEMP_FILE), whose failed
    # entry carries the same words.
    for rank in PLACEMENT[0]:
        with open(dumps / f"rank_{rank}", "rb") as f:
            entries = pickle.load(f)["entries"]
        errors = [e.get("error") or "" for e in entries]
        assert any("has sent nothing for" in e for e in errors), (rank, errors)


def test_a_rank_late_by_20_s_is_waited_for(hosts, tmp_path):
    shared = str(tmp_path)
    late_s = 20
    procs = _start(hosts, shared, late_s, 60)
    try:
        _wait_running(shared, procs)
        results, text = _collect(procs, 120, shared)
    finally:
        for p in procs:
            _kill(p)
    assert sorted(results) == [0, 1, 2, 3], text[-6000:]
    for r in results.values():
        assert r["error"] is None, r
        assert late_s <= r["took"] < 50, r  # every rank went through the late call
    assert all(p.returncode == 0 for p in procs), text[-6000:]
