"""The GPU check's first signal, in about 30 seconds, right after the module imports: does a ring
kernel run, link, and give the closed form, before the long test phases spend the lease.

    python scripts/gpu_smoke.py [--sizes 4K,1M,64M] [--calls 5]

Prints, one block each: the kernels' resource use (cuobjdump -res-usage: registers, stack,
spills per kernel), 2 processes on cuda:0 running all_reduce at each size with the link line
each rank logged ("CUDA ring kernels on cuda:0 ... CUDA IPC (same GPU)" or why the kernels were
declined), the ring kernel calls counted, the result against the closed form and microseconds
per call; then one call with ranks as threads of one process. A step that cannot run here (no
cuobjdump, no CUDA device) says why and the rest goes on. Exits 1 if any result was wrong or a
step failed, 0 otherwise. Runs over the emulated CUDA runtime too (scripts/test_cuda_emulated.sh;
tests/python/test_gpu_smoke.py), where the kernels run on host threads.
"""
import argparse
import datetime
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def resource_use():
    import torch_ring_backend._C as C
    tool = shutil.which("cuobjdump")
    if tool is None:
        print("resource use: no cuobjdump on PATH (nvcc's toolkit): not shown")
        return True
    done = subprocess.run([tool, "-res-usage", C.__file__], capture_output=True, text=True,
                          timeout=60)
    lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines()
             if "Function" in ln or "REG:" in ln]
    if not lines:
        print(f"resource use: cuobjdump found no kernel in {C.__file__} (exit {done.returncode}): "
              f"{(done.stdout + done.stderr).strip()[:300]}")
        return True
    print(f"resource use ({len(lines) // 2} kernels; REG registers per thread, STACK bytes, "
          "spills in the ptxas line of the build):")
    for ln in lines[:40]:
        print(f"  {ln}")
    if len(lines) > 40:
        print(f"  ... {len(lines) - 40} lines more")
    return True


def values(rank, count, call):
    i = torch.arange(count, dtype=torch.int64)
    return (((i * 11 + rank * 101 + call * 37) % 509) - 254).to(torch.float32)


def rank_all_reduce(sizes, calls):
    """One rank: each size's all_reduce `calls` times, timed, checked against the closed form."""
    from cuda_reference import _path_counts
    torch.cuda.set_device(0)
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=20))
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    for nbytes in sizes:
        count = nbytes // 4
        before = _path_counts()[0]
        x = values(rank, count, 0).to("cuda:0")
        dist.all_reduce(x)  # the first: links, lazy loading
        torch.cuda.synchronize()
        first_ok = torch.equal(x.cpu(), sum(values(r, count, 0) for r in range(world)))
        ins = [values(rank, count, c).to("cuda:0") for c in range(1, calls + 1)]
        torch.cuda.synchronize()
        start = time.perf_counter()
        for t in ins:
            dist.all_reduce(t)
        torch.cuda.synchronize()
        micros = (time.perf_counter() - start) * 1e6 / calls
        ok = first_ok and all(
            torch.equal(t.cpu(), sum(values(r, count, c) for r in range(world)))
            for c, t in enumerate(ins, start=1))
        rows.append((nbytes, ok, micros, _path_counts()[0] - before))
    dist.destroy_process_group()
    return rows


def processes(sizes, calls):
    from torch_ring_backend._launch import run_on_local_ranks
    with tempfile.TemporaryDirectory() as logs:
        env = {"TORCH_RING_DEBUG": "INFO", "TORCH_RING_DEBUG_FILE": os.path.join(logs, "ring.%r.log"),
               "PYTHONPATH": os.pathsep.join(sys.path)}
        try:
            results = run_on_local_ranks(rank_all_reduce, 2, sizes, calls, env=env, timeout_s=120)
        except Exception as e:  # noqa: BLE001 - said, and the next step still runs
            print(f"2 processes on cuda:0: FAILED: {type(e).__name__}: {str(e)[:2000]}")
            results = None
        for path in sorted(glob.glob(os.path.join(logs, "ring.*.log"))):
            for line in open(path, errors="replace"):
                if "CUDA ring kernels on" in line or "staged through host memory" in line:
                    print(f"  {os.path.basename(path)}: {line.split('] ', 1)[-1].strip()}")
    if results is None:
        return False
    print("2 processes on cuda:0, all_reduce float32 SUM:")
    print(f"  {'bytes':>10} {'closed form':>11} {'us/call':>10} {'kernels (rank 0, 1)':>20}")
    good = True
    for row0, row1 in zip(*results):
        ok = row0[1] and row1[1]
        good = good and ok
        print(f"  {row0[0]:>10} {'ok' if ok else 'WRONG':>11} {max(row0[2], row1[2]):>10.1f} "
              f"{row0[3]:>10} {row1[3]:>9}")
    return good


def threads():
    from cuda_ordering_stress import stress
    failures = stress(2, 1, 20)
    for f in failures:
        print(f"  {f}")
    return not failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="4K,1M,64M")
    p.add_argument("--calls", type=int, default=5)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("smoke: no CUDA device (torch.cuda.is_available() is False): nothing to run")
        return 0
    print(f"smoke on {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    steps = [("resource use", resource_use),
             ("processes", lambda: processes([parse_size(s) for s in args.sizes.split(",")],
                                             args.calls)),
             ("threads", threads)]
    failed = []
    for name, step in steps:
        started = time.monotonic()
        try:
            ok = step()
        except Exception as e:  # noqa: BLE001 - one step's failure does not hide the others
            print(f"{name}: FAILED: {type(e).__name__}: {e}")
            ok = False
        print(f"[{name}: {'ok' if ok else 'FAILED'} in {time.monotonic() - started:.1f} s]",
              flush=True)
        if not ok:
            failed.append(name)
    print(f"smoke: {'FAILED: ' + ', '.join(failed) if failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
