"""The small-collective latency check CI runs (issue 26): ring's 4 KiB all_reduce at world 2
over torch's `fake` process group's (torch's own cost per call: its dispatch and Work objects,
no data), both timed per call in the same job, alternating in blocks of 100 calls
(torch-ring-bench --latency); the median over five separate jobs. A core of this shared
machine runs at about half speed for seconds at a time, and a collective runs at the speed of
its slowest rank's core while fake, which couples no ranks, runs at each rank's own: so ring's
median is divided by the slowest rank's fake median. That cancels what moves every backend
alike (MPI's own 4 KiB median ranges 1.7-5.4 us here), so the ceiling can sit close enough to
catch ring's own slow path coming back: every call handed to the worker thread (two thread
wake-ups) instead of run on the caller's. Open MPI's figure is printed beside it where mpi4py
is installed, not judged.

    python3 scripts/latency_floor.py       # exit 0: the ratio is under its ceiling

A ratio over its ceiling is measured again, up to ATTEMPTS runs in all, and fails only if it
fails in every run.
"""
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ATTEMPTS = 3
JOBS = 5
# Ring over fake, median of JOBS jobs' ratios. Measured on this 2-core kind (2026-12-06, fake
# 7.2 us): 1.45-1.58; with every call on the worker thread (the mutant
# small_calls_never_run_here) 2.24-2.67, which the earlier ceiling of 2.7 (set when ring's own
# ratio was 1.8-2.1 and the mutant's 3.3) let pass. 2.0 sits between the two with room on each
# side; an unlucky run is measured again (ATTEMPTS).
CEILING = 2.0


def run_once(references):
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "latency.json")
        cmd = [sys.executable, "-m", "torch_ring_backend.bench", "--latency", "--jobs", str(JOBS),
               "--nproc", "2", "--sizes", "4K", "--calls", "2000", "--settle", "1000",
               "--reference", ",".join(references), "--json", out]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
        if done.returncode != 0:
            raise SystemExit(f"latency_floor: the benchmark failed ({' '.join(cmd)}):\n"
                             f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
        with open(out) as f:
            return json.load(f)["results"]["2"]


def median_of(jobs, backend):
    return statistics.median(statistics.median(job[backend]["4096"]) for job in jobs)


def main():
    references = ["fake"]
    if importlib.util.find_spec("mpi4py") is not None and shutil.which("mpirun"):
        references.append("mpi")
    for attempt in range(1, ATTEMPTS + 1):
        jobs = run_once(references)
        ratio = statistics.median(statistics.median(job["ring"]["4096"]) /
                                  job["fake_slowest_median"]["4096"] for job in jobs)
        mpi = f", mpi {median_of(jobs, 'mpi'):.1f} us" if "mpi" in references else ""
        print(f"latency_floor: run {attempt}: ring {median_of(jobs, 'ring'):.1f} us, fake "
              f"{median_of(jobs, 'fake'):.1f} us{mpi}; ring/fake {ratio:.2f} (ceiling {CEILING})",
              flush=True)
        if ratio <= CEILING:
            print("latency_floor: PASS")
            return 0
    print(f"latency_floor: FAIL: ring's 4 KiB all_reduce over fake's stayed above {CEILING}x "
          f"in {ATTEMPTS} runs")
    return 1


if __name__ == "__main__":
    sys.exit(main())
