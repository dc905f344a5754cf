"""The copy's start, read from the machine (common/cache_topology.h, TORCH_RING_CPU_SYSFS): with
a made-up sysfs tree laid out as the Linux kernel documents it (cpuN/cache/indexK/{level,type,
shared_cpu_list}) every rank logs whether its copies into shared memory start cached (the host's
ranks under one last-level cache: an Intel Xeon, a Zen 5 EPYC) or streamed (an L3 per core: the
Zen 2 EPYC VM; or no tree), with the caches it saw; the results are the closed form either way.
Which start is faster on which kind is measured in docs/notes/benchmarks_by_machine.md, not here."""
import datetime
import os

import pytest
import torch
import torch.distributed as dist

import torch_ring_backend  # noqa: F401
from torch_ring_backend._launch import run_on_local_ranks

CPUS = sorted(os.sched_getaffinity(0))


def _tree(root, l3_of):
    """A CPU tree where CPU c's L3 is shared by the list l3_of(c) (text, as the kernel writes)."""
    for cpu in CPUS:
        layout = [(1, "Data", str(cpu)), (1, "Instruction", str(cpu)), (2, "Unified", str(cpu)),
                  (3, "Unified", l3_of(cpu))]
        for k, (level, kind, shared) in enumerate(layout):
            d = root / f"cpu{cpu}" / "cache" / f"index{k}"
            d.mkdir(parents=True)
            (d / "level").write_text(f"{level}\n")
            (d / "type").write_text(f"{kind}\n")
            (d / "shared_cpu_list").write_text(f"{shared}\n")
    return str(root)


def _all_reduce_1mib():
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    n = 1 << 18
    ok = True
    for call in range(3):
        x = ((torch.arange(n) * 7 + rank * 13 + call) % 101).float()
        want = sum(((torch.arange(n) * 7 + r * 13 + call) % 101).float() for r in range(world))
        dist.all_reduce(x)
        ok = ok and torch.equal(x, want)
    dist.destroy_process_group()
    return ok


def _logs(tmp_path, tree):
    env = {"TORCH_RING_DEBUG": "INFO", "TORCH_RING_DEBUG_FILE": str(tmp_path / "ring.%r.log"),
           "TORCH_RING_CPU_SYSFS": tree}
    assert run_on_local_ranks(_all_reduce_1mib, 2, env=env, timeout_s=120) == [True, True]
    return [(tmp_path / f"ring.{r}.log").read_text() for r in range(2)]


def _list(cpus):
    return ",".join(str(c) for c in cpus)


def test_ranks_under_one_l3_start_cached(tmp_path):
    shared = _list(CPUS)
    for log in _logs(tmp_path, _tree(tmp_path / "cpu", lambda c: shared)):
        assert (f"copies into shared memory start cached (this host's ranks share one last-level "
                f"cache: rank 0: {shared}, rank 1: {shared}; from {tmp_path / 'cpu'})") in log, log


@pytest.mark.skipif(len(CPUS) < 2, reason=f"needs 2 CPUs, this process may use {CPUS}")
def test_cores_with_an_l3_each_start_streamed(tmp_path):
    apart = " ".join(str(c) for c in CPUS)
    for log in _logs(tmp_path, _tree(tmp_path / "cpu", str)):
        assert ("copies into shared memory start streamed (this host's ranks do not all run under "
                f"one last-level cache: rank 0: {apart}, rank 1: {apart};") in log, log


def test_an_unreadable_tree_starts_streamed(tmp_path):
    for log in _logs(tmp_path, str(tmp_path / "no-such-tree")):
        assert ("copies into shared memory start streamed (this host's ranks do not all run under "
                "one last-level cache: rank 0: ?, rank 1: ?;") in log, log
