"""Instructions per collective call on the caller's thread, counted by valgrind's callgrind:
ring's own per-call cost (its bookkeeping) beside torch's `fake` group, which does nothing.

    python scripts/call_instructions.py                    # ring and fake, 2000 calls each
    python scripts/call_instructions.py --calls 4000 --backends ring
    python scripts/call_instructions.py --backends ring --keep /tmp/cg   # then callgrind_annotate

Why instructions and not time: on this 2-core VM a call's time moves by 1.5-2x between jobs
and within one (docs/notes/latency_cpu.md), so a change of a few hundred ns per call needs many
alternating jobs to see; the instruction count of the same calls is the same in every run.
It counts what rank 0's process executes, world 1 by default (no peer, nothing to wait for), for
`pg.allreduce([t], opts).wait()` on 4 KiB of float32: torch's dispatch and pybind11, then the
backend. The count starts after 300 warm-up calls (callgrind_control turns it on) and covers
exactly `--calls` calls. With `--world 2` a second rank runs natively beside the counted one
(a FileStore between them): under valgrind rank 0 is the late one, so it finds its peer's part
waiting and the count is its share of the exchange without the spinning. The peer's waits
spin instead of sleeping (TORCH_RING_SPIN_US of 10 s for the peer only): natively the two
ranks stay in step and a wait of theirs almost never reaches the futex (250 calls of 16 MiB:
4 sleeps in all over both ranks, set-up included), but beside a rank slowed some fifty times
by valgrind the peer would sleep in every call, and the counted rank would pay a futex wake
per call that no native run pays. Needs valgrind (apt-get install valgrind).
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time


def child(backend, flag, calls, rank=0, world=1, store_path="", numel=1024, warmup=300):
    import torch
    import torch.distributed as dist
    import torch_ring_backend  # noqa: F401  (registers "ring")
    if backend == "fake":
        from torch.testing._internal.distributed.fake_pg import FakeStore
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    elif world == 1:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    else:
        dist.init_process_group(backend, store=dist.FileStore(store_path, world), rank=rank,
                                world_size=world)
    tensors = [torch.ones(numel)]
    pg = dist.distributed_c10d._get_default_group()
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.SUM
    for _ in range(warmup):
        pg.allreduce(tensors, opts).wait()
    if rank != 0:  # a peer, not counted: it runs the same calls at full speed
        for _ in range(calls):
            pg.allreduce(tensors, opts).wait()
        time.sleep(600)
    # The parent turns counting on, then removes the flag: the loop starts counted.
    with open(flag, "w") as f:
        f.write("ready")
    while os.path.exists(flag):
        time.sleep(0.01)
    for _ in range(calls):
        pg.allreduce(tensors, opts).wait()
    with open(flag + ".done", "w") as f:
        f.write("done")
    time.sleep(600)  # the parent dumps the counts and ends this process


# Longer than any of the peer's waits for a rank under valgrind (a 16 MiB call of rank 0 takes
# under a second there), far shorter than the group's timeout.
PEER_SPIN_US = 10_000_000


def _wait_for(path, proc, what):
    deadline = time.monotonic() + 900
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise SystemExit(f"call_instructions: the child exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"call_instructions: no {what} after 900 s")
        time.sleep(0.05)


def count(backend, calls, workdir, world=1, numel=1024, warmup=300):
    """Instructions per call of `backend`; the callgrind file stays in `workdir`."""
    flag = os.path.join(workdir, f"{backend}.flag")
    out = os.path.join(workdir, f"{backend}.callgrind")
    store = os.path.join(workdir, f"{backend}.store")
    # A kept directory may hold an earlier run's files: its ".done" would end the count at once.
    for stale in [flag, flag + ".done", store] + glob.glob(out + "*"):
        if os.path.exists(stale):
            os.remove(stale)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    me = [sys.executable, os.path.abspath(__file__), "--child", backend, flag, str(calls)]
    shape = [str(numel), str(warmup)]
    # The peer spins through its waits for the slowed rank 0 (see the top of this file).
    peer_env = dict(env, TORCH_RING_SPIN_US=str(PEER_SPIN_US))
    peers = [subprocess.Popen(me + [str(r), str(world), store] + shape, env=peer_env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for r in range(1, world)]
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
        + me + ["0", str(world), store] + shape,
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(flag, proc, "warm-up")
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True,
                       capture_output=True)
        os.remove(flag)
        _wait_for(flag + ".done", proc, "the counted calls")
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True,
                       capture_output=True)
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
    finally:
        for p in [proc] + peers:
            p.kill()
            p.wait()
    totals = []
    for path in glob.glob(out + "*"):
        with open(path) as f:
            for line in f:
                if line.startswith(("totals:", "summary:")):
                    totals.append(int(line.split()[1]))
    if not totals:
        raise SystemExit(f"call_instructions: callgrind wrote no counts for {backend}")
    return max(totals) / calls


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
              sys.argv[7], int(sys.argv[8]), int(sys.argv[9]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--backends", default="ring,fake")
    p.add_argument("--world", type=int, default=1,
                   help="ranks; rank 0 is counted, the others run at full speed beside it")
    p.add_argument("--keep", metavar="DIR",
                   help="write the callgrind files into DIR (for callgrind_annotate) and keep them")
    a = p.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        workdir = a.keep or scratch
        os.makedirs(workdir, exist_ok=True)
        for backend in a.backends.split(","):
            results[backend] = count(backend, a.calls, workdir, a.world)
            print(f"{backend:>6}: {results[backend]:9.0f} instructions per call", flush=True)
    if "ring" in results and "fake" in results:
        print(f"  ring over fake: {results['ring'] - results['fake']:.0f} instructions per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
