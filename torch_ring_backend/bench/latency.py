"""`torch-ring-bench --latency`: what a program that calls small collectives in a loop feels,
job after job. A latency table from one job hides what matters for such a program: which of
several speeds a whole job runs at, the tail, and the first calls after set-up. So this runs
--jobs separate jobs per world size (fresh processes each), and in each job:

  cold    the first 200 back-to-back 4 KiB calls after 5 warm-up calls (right after set-up);
  steady  per size, --settle untimed calls, then --calls timed back-to-back calls.

Every call is timed on its own (rank 0's clock), so each job gives a median, p90, p99 and mean
per size. On shared virtual machines a core's speed changes by up to 2x for seconds at a
time (other tenants on the same physical core), and a collective runs at the speed of its
slowest rank's core. So each rank also times torch's `fake` group, whose calls couple no ranks,
and the summary divides ring's median per job by the slowest rank's fake median ("over fake",
its spread across jobs in the table): what is left
of the job-to-job spread in it is ring's own. ring and torch's `fake` process group
(torch's own cost per call: dispatch and Work objects, no data moved) alternate in blocks of
100 calls in the same job, so that both meet the same core speed; Open MPI runs in jobs of its
own (mpirun, through mpi4py; latency_mpi.py), alternating with ring's. The summary gives, per
world size, backend and size, the median of
the job medians, the best and worst job's, and the goal checks of issue 26 for 4 KiB.

    torch-ring-bench --latency                       # 10 jobs, worlds 2 and 4
    torch-ring-bench --latency --jobs 5 --nproc 2 --sizes 4K --json lat.json
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from .machine import describe
from .options import PROG, parse_size

DEFAULT_SIZES = "8,64,512,4K,32K,64K"
COLD_CALLS = 200
COLD_WARMUP = 5
COLD_BYTES = 4096
GOAL_BYTES = 4096
JOB_TIMEOUT_S = 600


# ---- one rank of a ring job ----------------------------------------------------------------------

def cpu_probe_ms():
    """Milliseconds this core takes for a fixed piece of pure Python work (about 0.75 ms on the
    machine this was written on, at its faster speed). Kept in the results (probe_ms) beside
    each phase: it tells a slow core from a slow backend in most jobs, though not in all (an
    arithmetic loop feels less of a neighbour than torch's dispatch does)."""
    import time
    start = time.perf_counter()
    x = 0
    for i in range(20000):
        x += i * i
    return (time.perf_counter() - start) * 1e3


def _per_call_us(call, n):
    """Microseconds of each of n back-to-back calls."""
    import time
    times = []
    clock = time.perf_counter
    for _ in range(n):
        start = clock()
        call()
        times.append((clock() - start) * 1e6)
    return times


# Calls per block when ring and fake alternate (see _measure_sizes).
BLOCK_CALLS = 100


def _measure_sizes(groups, plan, probes):
    """{backend: {size: per-call microseconds}} for each of `groups` ({name: group}). The
    backends alternate in blocks of BLOCK_CALLS timed calls, so that both meet the core at the
    same speed: measured one after the other, a core's change of speed in between made their
    ratio within one job range 1.7-3.4."""
    import torch
    import torch.distributed as dist

    out = {name: {} for name in groups}
    for nbytes in plan["sizes"]:
        t = torch.ones(max(1, nbytes // 4))
        calls = {name: (lambda g=g: dist.all_reduce(t, group=g)) for name, g in groups.items()}
        for call in calls.values():
            for _ in range(plan["settle"]):
                call()
        before = cpu_probe_ms()
        dist.barrier()  # after the probe, which the ranks finish apart
        times = {name: [] for name in groups}
        for start in range(0, plan["calls"], BLOCK_CALLS):
            n = min(BLOCK_CALLS, plan["calls"] - start)
            for name, call in calls.items():
                # One untimed call first: fake's calls couple no ranks, so the ranks leave a
                # fake block apart (by up to 0.3 ms where their cores differ in speed), and
                # ring's first call of the next block would be charged that lead: 40 calls of
                # 4000, 1%, enough to set the p99 in a job where one rank always leads.
                call()
                times[name] += _per_call_us(call, n)
        dist.barrier()  # before the probe, as after the cold phase (ring_job_rank)
        probes.append((before + cpu_probe_ms()) / 2)
        for name in groups:
            out[name][str(nbytes)] = times[name]
    return out


def _slowest_probes(probes):
    """The largest over the ranks of each value in `probes` (over the ring group, after the
    timed work): each phase's probe, the slowest rank's."""
    import torch
    import torch.distributed as dist
    t = torch.tensor(probes, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def ring_job_rank(plan):
    """One rank of a ring job; rank 0 returns {"cold": [...], "ring": {size: [...]}, "fake": ...}."""
    import datetime

    import torch
    import torch.distributed as dist

    import torch_ring_backend  # noqa: F401 - registers "ring"

    torch.set_num_threads(1)
    dist.init_process_group("ring", timeout=datetime.timedelta(minutes=5))
    try:
        t = torch.ones(COLD_BYTES // 4)
        # The probe before the warm-up calls, not between them and the cold phase: the ranks
        # finish it apart (their cores' speeds differ), and the first timed call would wait out
        # that difference, up to 0.7 ms, which is the probe's and not the backend's.
        probes = [cpu_probe_ms()]
        for _ in range(COLD_WARMUP):
            dist.all_reduce(t)
        cold = _per_call_us(lambda: dist.all_reduce(t), COLD_CALLS)
        # A barrier before the probe after a phase, too: the ranks leave a phase's last call
        # apart, and one that started its probe at once would take the core from a peer that
        # still has to finish that call. Without it, the last of the 200 cold calls took
        # 2.2-2.8 ms in 5 of 10 jobs at world 4 (ring's median call: 45-100 us), and MPI's last
        # 1.2-3.4 ms in 4 of 10 (its median: 21-70 us).
        dist.barrier()
        probes[0] = (probes[0] + cpu_probe_ms()) / 2
        groups = {"ring": None}
        if plan["fake"]:
            import torch.testing._internal.distributed.fake_pg  # noqa: F401 - registers "fake"
            groups["fake"] = dist.new_group(backend="fake")
        result = {"cold": cold, **_measure_sizes(groups, plan, probes)}
        if plan["fake"]:
            # fake couples no ranks: each runs at its own core's speed, and ring at its slowest
            # rank's. So the floor ring is held against is the slowest rank's fake median.
            result["fake_slowest_median"] = dict(zip(
                (str(n) for n in plan["sizes"]),
                _slowest_probes([statistics.median(result["fake"][str(n)]) for n in plan["sizes"]])))
        slowest = _slowest_probes(probes)
        # One probe per size covers every backend of that size (they alternate).
        keys = ["cold"] + [str(n) for n in plan["sizes"]]
        probe_of = dict(zip(keys, slowest))
        probe_of_rank0 = dict(zip(keys, probes))
        result["probe_ms"] = {"cold": probe_of["cold"]}
        result["probe_ms_rank0"] = {"cold": probe_of_rank0["cold"]}
        for name in groups:
            for n in plan["sizes"]:
                result["probe_ms"][f"{name}:{n}"] = probe_of[str(n)]
                result["probe_ms_rank0"][f"{name}:{n}"] = probe_of_rank0[str(n)]
        return result if dist.get_rank() == 0 else None
    finally:
        dist.destroy_process_group()


# ---- the jobs ------------------------------------------------------------------------------------

def _run_ring_job(plan, world):
    from torch_ring_backend._launch import run_on_local_ranks
    return run_on_local_ranks(ring_job_rank, world, plan, timeout_s=JOB_TIMEOUT_S,
                              env={"OMP_NUM_THREADS": "1"})[0]


def _run_mpi_job(plan, world):
    with tempfile.TemporaryDirectory(prefix="ring-latency-mpi-") as folder:
        plan_path, result_path = os.path.join(folder, "plan.json"), os.path.join(folder, "out.json")
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        if os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        cmd = [shutil.which("mpirun") or "mpirun", "-n", str(world), "--oversubscribe",
               "--mca", "btl", "self,sm", sys.executable, "-m",
               "torch_ring_backend.bench.latency_mpi", plan_path, result_path]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
        if done.returncode != 0 or not os.path.exists(result_path):
            raise RuntimeError(f"the MPI job failed ({' '.join(cmd)}, exit code {done.returncode}):"
                               f"\n{(done.stdout + done.stderr)[-3000:]}")
        with open(result_path) as f:
            return json.load(f)


def run_jobs(plan, worlds, jobs, mpi, progress=print):
    """{world: [{"cold": [...], "ring": {size: [...]}, "fake": ..., "mpi": ..., "mpi_cold": ...}
    per job]}: each job's per-call microseconds, jobs of each backend alternating."""
    out = {}
    for world in worlds:
        out[world] = []
        for j in range(jobs):
            progress(f"[{PROG}] latency: world {world}, job {j + 1}/{jobs}")
            job = _run_ring_job(plan, world)
            if mpi:
                m = _run_mpi_job(plan, world)
                job["mpi"], job["mpi_cold"] = m["steady"], m["cold"]
                job["probe_ms"].update({f"mpi:{k}": v for k, v in m["probe_ms"].items()})
            out[world].append(job)
    return out


# ---- the summary -----------------------------------------------------------------------------------

def stats(times):
    """median, p90, p99 and mean of one job's per-call times (microseconds)."""
    s = sorted(times)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {"median": statistics.median(s), "p90": pick(0.90), "p99": pick(0.99),
            "mean": sum(s) / len(s)}


def summarize(results):
    """Per world, backend and size: each job's stats and their spread across jobs; per world,
    the 4 KiB goal checks. Pure: tested on made-up numbers (tests/python/test_latency_bench.py)."""
    summary = {}
    for world, jobs in results.items():
        rows = {}
        for backend in ("ring", "fake", "mpi"):
            if backend not in jobs[0]:
                continue
            for size in jobs[0][backend]:
                per_job = [stats(job[backend][size]) for job in jobs]
                medians = [p["median"] for p in per_job]
                # ring per job over the slowest rank's fake median in that job: the core's
                # speed taken out (fake meets it as ring does, alternating with it; a fixed
                # arithmetic loop, the probe, misses part of it). None for the references.
                norm = [p["median"] / job["fake_slowest_median"][size]
                        for p, job in zip(per_job, jobs)
                        if backend == "ring" and size in job.get("fake_slowest_median", {})]
                rows[(backend, int(size))] = {
                    "jobs": per_job,
                    "median_of_medians": statistics.median(medians),
                    "best_median": min(medians), "worst_median": max(medians),
                    "p99_of_medians": statistics.median(p["p99"] for p in per_job),
                    "mean_of_means": statistics.mean(p["mean"] for p in per_job),
                    "normalized_spread": max(norm) / min(norm) if norm else None}
        summary[world] = {"rows": rows, "goal": _goal(jobs, rows), "raw": jobs}
    return summary


def _goal(jobs, rows):
    """Issue 26's goal at 4 KiB: the worst job's ratios (each a job's own, then the worst job)."""
    ring = rows.get(("ring", GOAL_BYTES))
    if ring is None:
        return {}
    per_job = ring["jobs"]
    goal = {
        "worst_over_best_median": ring["worst_median"] / ring["best_median"],
        # The same for each job's median over its slowest rank's fake median (None: no fake).
        "worst_over_best_normalized": ring["normalized_spread"],
        "worst_mean_over_median": max(p["mean"] / p["median"] for p in per_job),
        "worst_p99_over_median": max(p["p99"] / p["median"] for p in per_job),
        "worst_cold200_over_median": max(sum(job["cold"]) / len(job["cold"]) / p["median"]
                                         for job, p in zip(jobs, per_job)),
    }
    fake, mpi = rows.get(("fake", GOAL_BYTES)), rows.get(("mpi", GOAL_BYTES))
    if fake is not None:
        goal["ring_share_us"] = ring["median_of_medians"] - fake["median_of_medians"]
        slowest = [job["fake_slowest_median"][str(GOAL_BYTES)] for job in jobs
                   if "fake_slowest_median" in job]
        if slowest:
            # Per job, ring's median over the slowest rank's fake median (both in that job).
            goal["ring_over_slowest_fake"] = statistics.median(
                p["median"] / f for p, f in zip(per_job, slowest))
    if mpi is not None:
        goal["mpi_median_us"] = mpi["median_of_medians"]
        goal["ring_over_mpi"] = ring["median_of_medians"] / mpi["median_of_medians"]
    return goal


def format_summary(summary):
    lines = [f"machine: {describe()}"]
    for world, s in summary.items():
        lines.append(f"world {world}: microseconds per all_reduce (float32), over "
                     f"{len(next(iter(s['rows'].values()))['jobs'])} jobs")
        lines.append(f"{'backend':>7} {'size':>7} {'med of med':>10} {'best':>7} {'worst':>7} "
                     f"{'p90':>7} {'p99':>7} {'mean':>7} {'over fake':>9}")
        for (backend, size), r in s["rows"].items():
            p90 = statistics.median(p["p90"] for p in r["jobs"])
            spread = "-" if r["normalized_spread"] is None else f"{r['normalized_spread']:.2f}"
            lines.append(f"{backend:>7} {size:>7} {r['median_of_medians']:>10.1f} "
                         f"{r['best_median']:>7.1f} {r['worst_median']:>7.1f} {p90:>7.1f} "
                         f"{r['p99_of_medians']:>7.1f} {r['mean_of_means']:>7.1f} {spread:>9}")
        medians = ", ".join(f"{p['median']:.1f}" for p in s["rows"].get(("ring", GOAL_BYTES), {})
                            .get("jobs", []))
        if medians:
            lines.append(f"ring 4 KiB job medians: {medians}")
            probes = ", ".join(f"{job['probe_ms'][f'ring:{GOAL_BYTES}']:.2f}"
                               for job in s.get("raw", [])
                               if f"ring:{GOAL_BYTES}" in job.get("probe_ms", {}))
            if probes:
                lines.append(f"slowest core's probe in those phases (ms): {probes}")
        for key, value in s["goal"].items():
            lines.append(f"  {key}: {'-' if value is None else f'{value:.2f}'}")
    return "\n".join(lines)


# ---- the command line ------------------------------------------------------------------------------

def main(argv):
    p = argparse.ArgumentParser(prog=f"{PROG} --latency", description=__doc__.splitlines()[0])
    p.add_argument("--latency", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--jobs", type=int, default=10, help="separate jobs per world size (default 10)")
    p.add_argument("--nproc", default="2,4", help="world sizes, comma-separated (default 2,4)")
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"bytes per call (default {DEFAULT_SIZES})")
    p.add_argument("--settle", type=int, default=1000, help="untimed calls per size (default 1000)")
    p.add_argument("--calls", type=int, default=2000, help="timed calls per size (default 2000)")
    p.add_argument("--reference", default="mpi,fake",
                   help="mpi, fake, both (default) or none: the references run in every job")
    p.add_argument("--json", dest="json_path", metavar="PATH", help="write every per-call time")
    a = p.parse_args(argv)
    refs = {r.strip() for r in a.reference.split(",") if r.strip() and r.strip() != "none"}
    if refs - {"mpi", "fake"} or a.jobs < 1 or a.calls < 10 or a.settle < 0:
        p.error("--reference takes mpi, fake or none; --jobs >= 1; --calls >= 10; --settle >= 0")
    try:
        sizes = [parse_size(s) for s in a.sizes.split(",")]
        worlds = [int(w) for w in a.nproc.split(",")]
    except (ValueError, argparse.ArgumentTypeError) as e:
        p.error(str(e))
    if "mpi" in refs and shutil.which("mpirun") is None:
        p.error("--reference mpi needs mpirun on PATH (and mpi4py)")
    plan = {"sizes": sizes, "settle": a.settle, "calls": a.calls, "fake": "fake" in refs}
    results = run_jobs(plan, worlds, a.jobs, "mpi" in refs,
                       progress=lambda m: print(m, file=sys.stderr, flush=True))
    summary = summarize(results)
    print(format_summary(summary))
    if a.json_path:
        with open(a.json_path, "w") as f:
            json.dump({"plan": plan, "results": {str(w): r for w, r in results.items()},
                       "goal": {str(w): s["goal"] for w, s in summary.items()}}, f)
    return 0


def summary_of_file(path):
    """The summary of a --json file written earlier (python -m torch_ring_backend.bench.latency
    FILE prints it)."""
    with open(path) as f:
        data = json.load(f)
    return summarize({int(w): jobs for w, jobs in data["results"].items()})


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(format_summary(summary_of_file(path)))
