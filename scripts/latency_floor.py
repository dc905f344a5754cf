"""The small-collective latency check CI runs (issues 26 and 67): ring's own share of a 4 KiB
all_reduce at world 2 (its median minus the slowest rank's median of torch's `fake` process
group, which is torch's own cost per call: dispatch and Work, no data) over the larger of two
references' whole call in the same job: that `fake` median, and Open MPI's 4 KiB all_reduce
(mpi4py, alternating jobs). The median over five separate jobs, each job's own ratio.

Why this form: the project's machines come in kinds whose costs differ in opposite ways. On the
AMD EPYC VM whose cores share no cache, torch's `fake` call costs 7 us and MPI's 2-7; on an
Intel Xeon whose cores share an L3, `fake` 3.2 us and MPI 3.8; on a Zen 5 EPYC with a shared
L3, `fake` 4.2 and MPI 2.1. Ring over `fake` alone (the earlier form, ceiling 2.0) measured 1.90
on the Xeon: one noisy run from failing there, while it had room on the EPYC it was tuned on.
Over the larger of the two, ring's share is held to what one whole call of either reference
costs on that machine in that job: never stricter than the earlier form (the denominator is at
least `fake`'s), and both references move with the core's speed of the moment (a core of these
shared machines runs at about half speed for seconds at a time). What it must catch is ring's
own slow path coming back: every call handed to the worker thread (two thread wake-ups), the
mutant small_calls_never_run_here. Measured on the Zen 5 EPYC (2026-12-06, five jobs): ring 0.51
(jobs 0.42-0.60), the mutant 2.04 (1.86-3.49). From the earlier figures of the other kinds
(their `fake` the larger reference): the Zen 2 EPYC's ring/fake of 1.45-1.58 and mutant's
2.24-2.67 give 0.45-0.58 and 1.24-1.67; the Xeon's issue figures (ring 6.0, fake 3.2, MPI 3.8
us) give 0.74.

    python3 scripts/latency_floor.py       # exit 0: the ratio is under its ceiling

A ratio over its ceiling is measured again, up to ATTEMPTS runs in all, and fails only if it
fails in every run. Without mpi4py the denominator is `fake`'s alone (the earlier form).
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
# Ring's share over the larger reference call, median of JOBS jobs' ratios (the top's figures:
# 0.45-0.74 for ring on three kinds of machine, 1.24 and more for the mutant). 1.0 sits between
# with room on each side; an unlucky run is measured again (ATTEMPTS).
CEILING = 1.0


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


def share_ratio(job):
    """One job's ring share over the larger reference call (see the top)."""
    ring = statistics.median(job["ring"]["4096"])
    fake = job["fake_slowest_median"]["4096"]
    reference = max(fake, statistics.median(job["mpi"]["4096"])) if "mpi" in job else fake
    return (ring - fake) / reference


def main():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from torch_ring_backend.bench.machine import describe
    references = ["fake"]
    if importlib.util.find_spec("mpi4py") is not None and shutil.which("mpirun"):
        references.append("mpi")
    print(f"latency_floor: machine: {describe()}", flush=True)
    for attempt in range(1, ATTEMPTS + 1):
        jobs = run_once(references)
        ratio = statistics.median(share_ratio(job) for job in jobs)
        over_fake = statistics.median(statistics.median(job["ring"]["4096"]) /
                                      job["fake_slowest_median"]["4096"] for job in jobs)
        mpi = f", mpi {median_of(jobs, 'mpi'):.1f} us" if "mpi" in references else ""
        print(f"latency_floor: run {attempt}: ring {median_of(jobs, 'ring'):.1f} us, fake "
              f"{median_of(jobs, 'fake'):.1f} us{mpi}; ring/fake {over_fake:.2f}; ring's share "
              f"over the larger of {' and '.join(references)} {ratio:.2f} (ceiling {CEILING})",
              flush=True)
        if ratio <= CEILING:
            print("latency_floor: PASS")
            return 0
    print(f"latency_floor: FAIL: ring's share of a 4 KiB all_reduce stayed above {CEILING}x the "
          f"larger reference call in {ATTEMPTS} runs")
    return 1


if __name__ == "__main__":
    sys.exit(main())
