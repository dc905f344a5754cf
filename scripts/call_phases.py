"""Where a small all_reduce's time goes, phase by phase, in cycles of the time-stamp counter:

    python scripts/call_phases.py                      # world 1 and 2, 4 KiB float32
    python scripts/call_phases.py --worlds 2 --numel 16384 --calls 50000

Builds the extension with the marks of csrc/common/phase_probe.h on (-DRING_PHASE_PROBE=ON, in
build/phases; the module users import is never touched), puts it in a package of its own
(build/phases/pkg), and runs `dist.all_reduce` of `--numel` float32 in a loop on each rank
(OMP_NUM_THREADS=1), `--warmup` calls untimed, then `--calls` timed. Each rank's process
writes, at exit, every phase's quartiles of the cycles from the mark before it to its own;
this prints rank 0's medians (the other ranks' agree within their spread) and the loop's time
per call measured in Python.

The phases follow a call that its caller runs (every small call where the peers are in step).
Phase 0 ("torch and Python") runs from the previous call's wait() to this all_reduce: torch's
dispatch, the Python wrapper and the loop, which torch's `fake` group pays too; phase 15 is
torch's way back from the backend to wait(). The others are ring's own. Why this and not
perf or callgrind: docs/notes/call_instructions.md ("Where a call's time goes, phase by phase")."""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import os, sys, time
import torch, torch.distributed as dist
import torch_ring_backend  # noqa: F401
numel, warmup, calls = (int(a) for a in sys.argv[1:4])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if world == 1:
    dist.init_process_group("ring", store=dist.HashStore(), rank=0, world_size=1)
else:
    dist.init_process_group("ring")
t = torch.zeros(numel)  # zeros stay zeros: no overflow, no subnormals over many calls
for _ in range(warmup):
    dist.all_reduce(t)
dist.barrier()
start = time.perf_counter()
for _ in range(calls):
    dist.all_reduce(t)
per_call = (time.perf_counter() - start) / calls * 1e6
check = torch.full((numel,), rank + 1.0)
dist.all_reduce(check)
assert check.eq(world * (world + 1) / 2).all(), f"rank {rank}: wrong sum {check[:4]}"
print(f"call-us {per_call:.3f}", file=sys.stderr)
dist.destroy_process_group()
"""


def build(build_dir):
    """Configures (once) and builds the probed extension; returns the package directory."""
    if not os.path.exists(os.path.join(build_dir, "build.ninja")):
        subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                        f"-DPython_EXECUTABLE={sys.executable}",
                        f"-DRING_CUDA={os.environ.get('TORCH_RING_CUDA_CMAKE', 'AUTO')}",
                        "-DRING_BUILD_TESTS=OFF", "-DRING_PHASE_PROBE=ON"],
                       check=True, stdout=subprocess.DEVNULL)
    # The same lock as scripts/dev_build.sh: never two builds at once on a small machine.
    subprocess.run(["flock", "/tmp/torch_ring_build.lock", "cmake", "--build", build_dir,
                    "--target", "_C", "-j", os.environ.get("MAX_JOBS", "2")], check=True)
    pkg = os.path.join(build_dir, "pkg")
    dest = os.path.join(pkg, "torch_ring_backend")
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "torch_ring_backend"), dest,
                    ignore=shutil.ignore_patterns("_C*.so", "_C.torch_version", "__pycache__"))
    for name in os.listdir(build_dir):
        if name.startswith("_C") and (name.endswith(".so") or name == "_C.torch_version"):
            shutil.copy(os.path.join(build_dir, name), dest)
    return pkg


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(pkg, world, numel, warmup, calls):
    """Runs the loop on `world` local ranks; returns rank 0's stderr."""
    env = dict(os.environ, PYTHONPATH=pkg, OMP_NUM_THREADS="1", WORLD_SIZE=str(world),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    procs, outs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for rank in range(world):
            out = open(os.path.join(tmp, f"rank{rank}.err"), "w+")
            outs.append(out)
            procs.append(subprocess.Popen(
                [sys.executable, "-c", CHILD, str(numel), str(warmup), str(calls)],
                env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)), cwd=tmp,
                stdout=subprocess.DEVNULL, stderr=out))
        codes = [p.wait(timeout=900) for p in procs]
        texts = []
        for out in outs:
            out.seek(0)
            texts.append(out.read())
            out.close()
    if any(codes):
        raise SystemExit(f"world {world}: exit codes {codes}\n" + "\n".join(texts))
    return texts[0]


def parse(text):
    """{phase: (p25, p50, p75, count, name)}, ticks per us, Python's us per call."""
    phases, rate, per_call = {}, None, None
    for line in text.splitlines():
        parts = line.split(maxsplit=6)
        if line.startswith("ring-phase "):
            phases[int(parts[1])] = (int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5]),
                                     parts[6])
        elif line.startswith("ring-phase-rate "):
            rate = float(parts[1])
        elif line.startswith("call-us "):
            per_call = float(parts[1])
    if not phases or rate is None or per_call is None:
        raise SystemExit("the probed module printed no phases: was it built with "
                         "RING_PHASE_PROBE?\n" + text)
    return phases, rate, per_call


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worlds", default="1,2")
    p.add_argument("--numel", type=int, default=1024, help="float32 values (default 4 KiB)")
    p.add_argument("--warmup", type=int, default=3000)
    p.add_argument("--calls", type=int, default=30000)
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build", "phases"))
    args = p.parse_args(argv)
    pkg = build(args.build_dir)
    worlds = [int(w) for w in args.worlds.split(",")]
    results = {w: parse(run_world(pkg, w, args.numel, args.warmup, args.calls)) for w in worlds}
    print(f"# all_reduce of {args.numel} float32, rank 0, median cycles per phase "
          f"(ns at the counter's rate), {args.calls} calls")
    print("phase  " + "".join(f"{'world ' + str(w):>20}" for w in worlds) + "  what")
    every = sorted({i for w in worlds for i in results[w][0]})
    for i in every:
        cells, name = "", ""
        for w in worlds:
            phases, rate, _ = results[w]
            if i in phases:
                p50, name = phases[i][1], phases[i][4]
                cells += f"{p50:>10} {p50 / rate * 1000:>7.0f} ns"
            else:
                cells += f"{'-':>20}"
        print(f"{i:>5}  {cells}  {name}")
    torch_side = {0, 15}
    for label, keep in (("ring's own (phases 1-14, 16)", lambda i: i not in torch_side),
                        ("torch's (phases 0, 15)", lambda i: i in torch_side)):
        cells = ""
        for w in worlds:
            phases, rate, _ = results[w]
            total = sum(v[1] for i, v in phases.items() if keep(i))
            cells += f"{total:>10} {total / rate * 1000:>7.0f} ns"
        print(f"{'sum':>5}  {cells}  {label}")
    print(f"{'loop':>5}  " + "".join(f"{results[w][2] * 1000:>18.0f} ns" for w in worlds)
          + "  Python's time per call (the sums of medians need not add up to it)")


if __name__ == "__main__":
    main()
