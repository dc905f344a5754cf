"""The CPU speed regression check CI runs: ratios to references measured in the same run, held
to floors far below what this machine measures, so that noise cannot fail it but a change
that halves ring's speed does. No absolute time is asserted.

    python3 scripts/perf_floor.py          # exit 0: every ratio above its floor

One torch-ring-bench run (2 ranks, gloo and, where mpi4py is installed, Open MPI beside ring)
over the sizes below. A floor that fails is measured again, up to ATTEMPTS runs in all, and
fails the check only if it fails in every run: a slow run of a shared machine passes, a slow
backend does not.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ATTEMPTS = 5
# (collective, bytes, reference, floor on reference time / ring time). On this 2-core kind a
# whole run is now and then several times slower for large copies (new processes' memory on
# this VM: docs/notes/benchmarks_cpu.md), so each floor sits below what such a slow run measures
# (in brackets; the usual range first): a change that makes ring several times slower, or
# gloo's equal, fails every run; a slow run of the machine does not.
FLOORS = [
    ("all_reduce", 4096, "gloo", 10.0),     # 46-230x (23x)
    ("all_reduce", 1048576, "gloo", 2.0),   # 11-32x (4.1x)
    ("all_gather", 1048576, "gloo", 2.0),   # 9-24x (5.9x)
    ("all_reduce", 4096, "mpi", 0.1),       # 0.2-0.7x (0.26x)
    ("all_reduce", 1048576, "mpi", 0.15),   # 0.9-1.9x (0.22x)
    ("broadcast", 1048576, "mpi", 0.12),    # 1.3-1.7x (0.18x)
]


def run_bench(references, sizes):
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "rows.json")
        collectives = sorted({c for c, _, _, _ in FLOORS})
        cmd = [sys.executable, "-m", "torch_ring_backend.bench", "--nproc", "2",
               "--reference", ",".join(references), "--collectives", ",".join(collectives),
               "-b", str(min(sizes)), "-e", str(max(sizes)), "--json", out]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"perf_floor: the benchmark failed ({' '.join(cmd)}):\n"
                             f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
        with open(out) as f:
            return json.load(f)["rows"]


def ratio(rows, collective, nbytes, reference):
    for row in rows:
        if row["collective"] == collective and row["bytes"] == nbytes:
            return row["references"][reference]["ratio"]
    raise SystemExit(f"perf_floor: no row for {collective} at {nbytes} bytes")


def main():
    references = ["gloo"]
    if importlib.util.find_spec("mpi4py") is not None:
        references.append("mpi")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from torch_ring_backend.bench.machine import describe
    print(f"perf_floor: machine: {describe()}", flush=True)
    floors = [f for f in FLOORS if f[2] in references]
    sizes = [b for _, b, _, _ in floors]
    failing = floors
    for attempt in range(1, ATTEMPTS + 1):
        rows = run_bench(references, sizes)
        still = []
        for collective, nbytes, reference, floor in failing:
            got = ratio(rows, collective, nbytes, reference)
            verdict = "ok" if got is not None and got >= floor else "BELOW"
            print(f"perf_floor: run {attempt}: {collective} {nbytes} B: {reference} time / ring "
                  f"time = {got if got is None else round(got, 2)} (floor {floor}) {verdict}")
            if verdict != "ok":
                still.append((collective, nbytes, reference, floor))
        failing = still
        if not failing:
            print(f"perf_floor: every ratio above its floor ({', '.join(references)})")
            return 0
    for collective, nbytes, reference, floor in failing:
        print(f"perf_floor: FAILED: {collective} at {nbytes} B stayed below {floor}x "
              f"{reference} in {ATTEMPTS} runs", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
