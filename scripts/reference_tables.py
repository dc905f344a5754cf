"""Issue 49's tables: all_reduce on ring beside DeepSpeed's shared-memory op, Open MPI and gloo,
quiet and under a competing load, over several separate jobs, as markdown.

    python scripts/reference_tables.py --jobs 3 --out /tmp/tables   # world 2, float32 + bfloat16
    python scripts/reference_tables.py --summarize /tmp/tables       # the tables again
    python scripts/reference_tables.py --summarize /tmp/after --before /tmp/before

Each job is one `torch-ring-bench --nproc N -b 4K -e 64M --reference deepspeed,mpi,gloo` run
(its --json kept in --out); the jobs of every (dtype, load) pair alternate, so that slow spells
of a shared machine spread over all of them. A table cell is ring's time and the reference's
(median over the jobs of each job's per-call time at that size), and their ratio: below 1 ring
is faster. References that refuse a case (MPI has no bfloat16) leave it empty."""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

REFERENCES = ("deepspeed", "mpi", "gloo")


def run_jobs(args):
    os.makedirs(args.out, exist_ok=True)
    for job in range(args.jobs):
        for dtype in args.dtypes:
            for load in args.loads:
                path = os.path.join(args.out, f"w{args.nproc}_{dtype}_load{load}_job{job}.json")
                cmd = [sys.executable, "-m", "torch_ring_backend.bench", "--nproc",
                       str(args.nproc), "-b", args.min_bytes, "-e", args.max_bytes, "--dtype",
                       dtype, "--reference", ",".join(args.references), "--load", load,
                       "--iters", str(args.iters), "--json", path]
                print(" ".join(cmd), file=sys.stderr, flush=True)
                done = subprocess.run(cmd, capture_output=True, text=True,
                                      env=dict(os.environ, OMP_NUM_THREADS="1"))
                if done.returncode != 0:
                    sys.exit(f"job failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def _human(n):
    return f"{n // (1 << 20)} MiB" if n >= 1 << 20 else f"{n // 1024} KiB"


def _runs(folder):
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        meta = data["meta"]
        key = (meta["world_size"], meta["dtype"], meta.get("load_processes", 0))
        runs.setdefault(key, []).append(data["rows"])
    return runs


def summarize(folder, before=None):
    """The tables of the jobs in `folder`; with `before` (the jobs of an earlier build), ring's
    median there too, as the first column."""
    runs, earlier = _runs(folder), _runs(before) if before else {}
    for (world, dtype, load), jobs in sorted(runs.items()):
        refs = [r for r in REFERENCES if r in jobs[0][0]["references"]]
        old = earlier.get((world, dtype, load))
        print(f"\n### world {world}, {dtype}, {'load ' + str(load) if load else 'quiet'} "
              f"({len(jobs)} jobs; us per call, median over jobs; ratio = ring / reference)\n")
        print("| size | " + ("ring before | " if old else "") + "ring | "
              + " | ".join(f"{r} | ring/{r}" for r in refs) + " |")
        print("|---" * (2 + bool(old) + 2 * len(refs)) + "|")
        for i, row in enumerate(jobs[0]):
            ring = statistics.median(job[i]["time_us"] for job in jobs)
            cells = [_human(row["bytes"])]
            if old:
                cells.append(f"{statistics.median(job[i]['time_us'] for job in old):.1f}")
            cells.append(f"{ring:.1f}")
            for r in refs:
                times = [job[i]["references"][r]["time_us"] for job in jobs]
                if any(t is None for t in times):
                    cells += ["-", "-"]
                    continue
                ref = statistics.median(times)
                cells += [f"{ref:.1f}", f"{ring / ref:.2f}"]
            print("| " + " | ".join(cells) + " |")
        wrong = sum(row["wrong"] + sum((v["wrong"] or 0) for v in row["references"].values())
                    for job in jobs for row in job)
        print(f"\n#wrong over every job, ring and references: {wrong}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="reference_tables")
    p.add_argument("--summarize", metavar="FOLDER", help="print the tables of earlier jobs")
    p.add_argument("--before", metavar="FOLDER",
                   help="with --summarize: an earlier build's jobs, for a ring-before column")
    p.add_argument("--jobs", type=int, default=3)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--dtypes", type=lambda s: s.split(","), default=["float32", "bfloat16"])
    p.add_argument("--loads", type=lambda s: s.split(","), default=["0", "cores"])
    p.add_argument("--references", type=lambda s: s.split(","), default=list(REFERENCES))
    p.add_argument("-b", "--min-bytes", default="4K")
    p.add_argument("-e", "--max-bytes", default="64M")
    p.add_argument("--iters", type=int, default=100)
    args = p.parse_args()
    if args.summarize:
        summarize(args.summarize, args.before)
        return
    run_jobs(args)
    summarize(args.out)


if __name__ == "__main__":
    main()
