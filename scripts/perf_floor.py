"""The CPU speed regression check CI runs: ratios to references measured in the same run, held
to floors far below what this machine measures, so that noise cannot fail it but a change
that halves ring's speed does. No absolute time is asserted.

    python3 scripts/perf_floor.py          # exit 0: every ratio above its floor

One torch-ring-bench run (2 ranks, gloo and, where mpi4py is installed, Open MPI beside ring)
over the sizes below. A floor that fails is measured again, up to ATTEMPTS runs in all, and
fails the check only if it fails in every run: a slow moment of a shared machine passes, a
slow backend does not.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ATTEMPTS = 3
# (collective, bytes, reference, floor on reference time / ring time). What this 2-core kind
# measured (docs/benchmarks_cpu.md, and five runs when these floors were set) is in the
# comment; each floor is about half of the lowest ratio seen, so halving ring's speed fails.
FLOORS = [
    ("all_reduce", 4096, "gloo", 20.0),         # 60-600x
    ("all_reduce", 1048576, "gloo", 3.0),       # 7-37x (18-32x with the caller-thread path)
    ("all_gather", 1048576, "gloo", 2.0),       # 5-30x
    ("broadcast", 1048576, "gloo", 3.0),        # 10-50x
    ("all_reduce", 4096, "mpi", 0.1),           # 0.2-0.4x (MPI: 2-4 us)
    ("all_reduce", 1048576, "mpi", 0.45),       # 0.87-1.9x
    ("broadcast", 1048576, "mpi", 0.6),         # 1.2-1.7x
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
