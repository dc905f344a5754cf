"""TORCH_RING_CPU_BIND (common/cpu_binding.h): with `core`, each rank's thread that created
the group, and the group's worker thread it starts, run on one CPU of their own among the
machine's ranks, the local rank's in order (as mpirun --bind-to core); unset, nothing is bound;
more ranks than CPUs: nothing is bound and the log says why; any other value fails set-up by
name. What the binding is for (both ranks put on one CPU right after set-up) is measured in
docs/notes/latency_cold_phase.md, not here."""
import datetime
import os
import re
import time

import pytest
import torch
import torch.distributed as dist

import torch_ring_backend  # noqa: F401
from torch_ring_backend._launch import RankFailed, run_on_local_ranks

CPUS = sorted(os.sched_getaffinity(0))


def _allowed(tid):
    """The CPUs a thread of this process may run on, from the kernel's own account of it."""
    with open(f"/proc/self/task/{tid}/status") as f:
        text = re.search(r"^Cpus_allowed_list:\s*(\S+)", f.read(), re.M).group(1)
    cpus = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    return cpus


def _threads_named(name):
    tids = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    tids.append(tid)
        except OSError:
            pass
    return tids


def _bind_and_reduce():
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    caller = sorted(os.sched_getaffinity(0))
    # The worker names itself once it runs, which may be just after set-up returns.
    deadline = time.monotonic() + 10
    while not _threads_named("ring-worker") and time.monotonic() < deadline:
        time.sleep(0.01)
    workers = [_allowed(tid) for tid in _threads_named("ring-worker")]
    # A second group, made on the bound thread: it binds nothing more, and still counts every
    # rank of the machine with a CPU of its own (its log line says the spin it chose).
    second = dist.new_group(backend="ring")
    x = torch.full((1000,), float(rank + 1))
    dist.all_reduce(x)
    y = torch.full((10,), float(rank + 1))
    dist.all_reduce(y, group=second)
    ok = bool(torch.equal(x, torch.full((1000,), world * (world + 1) / 2.0))
              and torch.equal(y, torch.full((10,), world * (world + 1) / 2.0)))
    after = sorted(os.sched_getaffinity(0))
    dist.destroy_process_group()
    return {"caller": caller, "workers": workers, "after": after, "ok": ok}


def _log_of(folder, rank):
    with open(os.path.join(folder, f"ring.{rank}.log")) as f:
        return f.read()


def _env(tmp_path, bind):
    env = {"TORCH_RING_DEBUG": "INFO", "TORCH_RING_DEBUG_FILE": str(tmp_path / "ring.%r.log")}
    if bind is not None:
        env["TORCH_RING_CPU_BIND"] = bind
    return env


@pytest.mark.skipif(len(CPUS) < 2, reason=f"needs 2 CPUs, this process may use {CPUS}")
@pytest.mark.parametrize("bind", ["core", "CORE"])
def test_core_binds_each_rank_to_the_cpu_of_its_local_rank(tmp_path, bind):
    results = run_on_local_ranks(_bind_and_reduce, 2, env=_env(tmp_path, bind), timeout_s=120)
    for rank, r in enumerate(results):
        assert r["ok"], r
        assert r["caller"] == [CPUS[rank]], r
        assert r["after"] == [CPUS[rank]], r
        # The group's worker was started by the bound thread: the same one CPU.
        assert r["workers"] and all(w == [CPUS[rank]] for w in r["workers"]), r
        log = _log_of(str(tmp_path), rank)
        assert (f"TORCH_RING_CPU_BIND=core: bound this thread to CPU {CPUS[rank]} "
                f"(local rank {rank} of 2 on CPUs") in log, log
        assert f"already bound to CPU {CPUS[rank]}" in log, log
        # Both groups spin as where every rank has a core (500 us), the second too.
        spins = re.findall(r"a wait spins up to (\d+) us before it sleeps \(2 rank\(s\) of this "
                           rf"machine, {len(CPUS)} CPU\(s\)\)", log)
        assert spins == ["500", "500"], log


def test_unset_or_none_binds_nothing(tmp_path):
    for bind in (None, "none"):
        results = run_on_local_ranks(_bind_and_reduce, 2, env=_env(tmp_path, bind), timeout_s=120)
        for rank, r in enumerate(results):
            assert r["ok"], r
            assert r["caller"] == CPUS and r["after"] == CPUS, r
            assert all(w == CPUS for w in r["workers"]), r
            assert "TORCH_RING_CPU_BIND" not in _log_of(str(tmp_path), rank)


@pytest.mark.skipif(len(CPUS) > 3, reason=f"needs more ranks than its {len(CPUS)} CPUs")
def test_more_ranks_than_cpus_are_not_bound_and_the_log_says_so(tmp_path):
    world = len(CPUS) + 1
    results = run_on_local_ranks(_bind_and_reduce, world, env=_env(tmp_path, "core"),
                                 timeout_s=180)
    for rank, r in enumerate(results):
        assert r["ok"], r
        assert r["caller"] == CPUS and r["after"] == CPUS, r
        log = _log_of(str(tmp_path), rank)
        assert re.search(rf"WARN\] TORCH_RING_CPU_BIND=core: the {world} ranks of this host "
                         rf"share {len(CPUS)} CPU\(s\) \([0-9,-]+\); not bound", log), log


def _init_only():
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=30))


def test_an_unknown_binding_fails_set_up_by_name():
    with pytest.raises(RankFailed) as failed:
        run_on_local_ranks(_init_only, 2, env={"TORCH_RING_CPU_BIND": "socket"}, timeout_s=120)
    assert "TORCH_RING_CPU_BIND='socket' must be none, core or numa (any case)" in str(failed.value)
