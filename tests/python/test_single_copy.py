"""Single-copy messages between processes (TORCH_RING_SINGLE_COPY_BYTES; transport/link.h,
SendLink::lendsFrom): every collective with its large ring messages lent (read by the receiver
with process_vm_readv) against gloo in the same run and bit for bit against the slot path, and a
rank that a seccomp profile forbids process_vm_readv (as Docker's default profile does without
CAP_SYS_PTRACE, seccomp(2)): it warns once, its peers copy into slots for it, and the results
stay right. Whether lending is faster is measured, not asserted: docs/notes/single_copy.md."""
import ctypes
import datetime
import errno
import hashlib
import os
import platform

import pytest
import torch
import torch.distributed as dist

import torch_ring_backend  # noqa: F401
from torch_ring_backend._launch import run_on_local_ranks

# Large enough that every collective takes many 256 KiB slices on each link.
COUNT = 3 * (1 << 18) + 12345
LENT = "single-copy messages: messages of 1 bytes or more lent to rank(s)"


def _forbid_process_vm_readv():
    """Installs a seccomp filter on this thread (and the threads it starts) under which
    process_vm_readv fails with EPERM, as in a container whose profile leaves it out."""
    arch, nr = {"x86_64": (0xC000003E, 310), "aarch64": (0xC00000B7, 270)}[platform.machine()]

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    ld_word, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, fail = 0x7FFF0000, 0x00050000 | errno.EPERM  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO
    program = [
        SockFilter(ld_word, 0, 0, 4),  # seccomp_data.arch
        SockFilter(jeq, 1, 0, arch),
        SockFilter(ret, 0, 0, allow),  # another ABI: not ours to judge
        SockFilter(ld_word, 0, 0, 0),  # seccomp_data.nr
        SockFilter(jeq, 0, 1, nr),
        SockFilter(ret, 0, 0, fail),
        SockFilter(ret, 0, 0, allow),
    ]
    filters = (SockFilter * len(program))(*program)
    prog = SockFprog(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def _digest(t):
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def _every_collective(forbid_rank):
    """Each collective on ring and on gloo; exact where the closed form is (integer-valued
    floats, moved data), and the digests of float sums whose bits depend on their order."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if rank == forbid_rank:
        _forbid_process_vm_readv()
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    failures, digests = [], {}

    def same(name, got, want):
        if not torch.equal(got, want):
            bad = (got != want).nonzero()[:3].flatten().tolist()
            failures.append(f"rank {rank}: {name} differs from gloo at {bad}")

    g = torch.Generator().manual_seed(1234 + rank)
    exact = torch.randint(-1000, 1000, (COUNT,), generator=g).float()
    order = torch.randn(COUNT, generator=g)
    for name, x, op in (("sum", exact, dist.ReduceOp.SUM), ("max", exact, dist.ReduceOp.MAX)):
        ring_out, gloo_out = x.clone(), x.clone()
        dist.all_reduce(ring_out, op=op)
        dist.all_reduce(gloo_out, op=op, group=gloo)
        same(f"all_reduce {name}", ring_out, gloo_out)
    for name, op in (("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG)):
        y = order.clone()
        dist.all_reduce(y, op=op)
        digests[f"all_reduce {name}"] = _digest(y)
    ring_all = torch.empty(world * COUNT)
    gloo_all = torch.empty(world * COUNT)
    dist.all_gather_into_tensor(ring_all, order)
    dist.all_gather_into_tensor(gloo_all, order, group=gloo)
    same("all_gather", ring_all, gloo_all)
    digests["all_gather"] = _digest(ring_all)
    for root in range(world):
        ring_b = order.clone() if rank == root else torch.zeros(COUNT)
        gloo_b = order.clone() if rank == root else torch.zeros(COUNT)
        dist.broadcast(ring_b, root)
        dist.broadcast(gloo_b, root, group=gloo)
        same(f"broadcast from {root}", ring_b, gloo_b)
    part = COUNT // world
    whole = order[: part * world].clone()
    ring_rs = torch.empty(part)
    dist.reduce_scatter_tensor(ring_rs, whole)
    digests["reduce_scatter"] = _digest(ring_rs)
    dist.destroy_process_group()
    return failures, digests


def _run(tmp_path, world, single_copy, forbid_rank=-1):
    env = {"TORCH_RING_SINGLE_COPY_BYTES": str(single_copy), "TORCH_RING_DEBUG": "INFO",
           "TORCH_RING_DEBUG_FILE": str(tmp_path / f"ring.{single_copy}.%r.log")}
    results = run_on_local_ranks(_every_collective, world, forbid_rank, env=env, timeout_s=240)
    for failures, _ in results:
        assert failures == []
    digests = [d for _, d in results]
    for d in digests[1:]:
        assert d.keys() == digests[0].keys()
        for k in ("all_reduce sum", "all_reduce avg", "all_gather"):
            assert d[k] == digests[0][k], f"{k} differs between ranks"
    logs = [(tmp_path / f"ring.{single_copy}.{r}.log").read_text() for r in range(world)]
    return digests, logs


@pytest.mark.parametrize("world", [2, 3])
def test_lent_messages_give_gloos_results_and_the_slot_paths_bits(tmp_path, world):
    lent, lent_logs = _run(tmp_path, world, 1)
    slots, slot_logs = _run(tmp_path, world, 0)
    assert lent == slots  # the same plan: the same bits on every rank, whoever copies
    for r, log in enumerate(lent_logs):
        assert LENT in log, log[-3000:]
        assert " WARN] single-copy" not in log, log[-3000:]
    for log in slot_logs:
        assert "single-copy messages: off (TORCH_RING_SINGLE_COPY_BYTES=0)" in log, log[-3000:]


def test_a_rank_whose_profile_forbids_the_read_is_sent_copies(tmp_path):
    digests, logs = _run(tmp_path, 3, 1, forbid_rank=1)
    # Rank 1 says once why it reads nobody; ranks 0 and 2 still lend to each other, not to it.
    refusal = ("this rank cannot read rank 0's: process_vm_readv refused: Operation not "
               "permitted")
    assert logs[1].count(" WARN] single-copy messages:") == 1, logs[1][-3000:]
    assert refusal in logs[1], logs[1][-3000:]
    for r in (0, 2):
        assert "rank 1 does not read this rank's memory" in logs[r], logs[r][-3000:]
        assert " WARN] single-copy" not in logs[r], logs[r][-3000:]
    assert f"{LENT} 2" in logs[0] and f"{LENT} 0" in logs[2]
    slots, _ = _run(tmp_path, 3, 0)
    assert digests == slots
