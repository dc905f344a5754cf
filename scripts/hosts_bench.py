#!/usr/bin/env python3
"""Collectives on emulated hosts: the flat ring, the two-level plans and gloo side by side.

HOSTS network namespaces (each also its own IPC namespace, so that the ranks see separate
hosts) on one emulated switch (tests/python/link_emulator.py EmulatedSwitch: TUN devices and a
relay process, for kernels without netem) with DELAY ms each way, NPROC ranks per host, started
by torchrun --nnodes=HOSTS. Each job runs torch-ring-bench with gloo as the reference in the
same job; jobs alternate between the plans (TORCH_RING_ALGO=ring, i.e. flat, and the plans
named by --algos), REPEATS rounds, and the table gives per size the median over the jobs of
each backend's time. Needs root. Removes what it creates.

    python scripts/hosts_bench.py --hosts 4 --nproc 2 --delay-ms 1 --repeats 3 \\
        [--algos auto,hier_ring] [-- bench arguments]
    python scripts/hosts_bench.py --hosts 3 --nproc 3,1,2 ...   # hosts of unequal size

Mind what it measures: the relay is one Python process on the same cores as the ranks, so
without a line rate, above a few MiB every backend runs at the relay's rate; the small sizes
show the latency that the plans are about. --rate-mb-s R gives every host's port R MB/s each
way (well under the relay's ~0.7 GB/s in all), so that the network, not the relay, is the
slowest part, as it is between real hosts. --json PATH keeps every job's rows.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))
from link_emulator import EmulatedSwitch  # noqa: E402


def run_job(switch, namespaces, nprocs, algo, bench, port, out_json, timeout_s):
    procs = []
    tag = uuid.uuid4().hex[:6]
    for i, ns in enumerate(namespaces):
        env = dict(os.environ, TORCH_RING_ALGO=algo, GLOO_SOCKET_IFNAME=switch.dev[i],
                   OMP_NUM_THREADS="1",
                   PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        args = list(bench) + (["--json", out_json] if i == 0 else [])
        cmd = ["ip", "netns", "exec", ns, "unshare", "--ipc", sys.executable, "-m",
               "torch.distributed.run", f"--nnodes={len(namespaces)}",
               f"--nproc_per_node={nprocs[i]}", "--rdzv-backend=c10d",
               f"--rdzv-endpoint={switch.ip[0]}:{port}", f"--rdzv-id=hosts{tag}",
               f"--rdzv-conf=is_host={1 if i == 0 else 0}", f"--local-addr={switch.ip[i]}",
               "--max-restarts=0", "-m", "torch_ring_backend.bench", *args]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE if i == 0 else subprocess.DEVNULL,
                                      text=True))
    try:
        rcs = [p.wait(timeout=timeout_s) for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        raise RuntimeError(f"{algo}: the job ran past {timeout_s} s")
    if any(rcs):
        raise RuntimeError(f"{algo}: exit codes {rcs}: {procs[0].stderr.read()[-2000:]}")
    with open(out_json) as f:
        return json.load(f)["rows"]


def table(results, algos):
    """Per collective and size: the median over jobs of ring's time under each plan, and of
    gloo's (all jobs)."""
    keys = sorted({(r.get("collective", "all_reduce"), r["bytes"])
                   for rows in results.values() for job in rows for r in job})
    head = f"{'collective':>14} {'bytes':>10} " + " ".join(f"{a + ' us':>14}" for a in algos)
    head += f" {'gloo us':>10}" + "".join(f" {'flat/' + a:>12}" for a in algos if a != "ring")
    lines = [head]

    def rows_of(a, key):
        return [r for job in results[a] for r in job
                if (r.get("collective", "all_reduce"), r["bytes"]) == key]

    for key in keys:
        med, gloo = {}, []
        for a in algos:
            med[a] = statistics.median(r["time_us"] for r in rows_of(a, key))
            gloo += [r["references"]["gloo"]["time_us"] for r in rows_of(a, key)
                     if r["references"]["gloo"]["time_us"] is not None]
        line = f"{key[0]:>14} {key[1]:>10} " + " ".join(f"{med[a]:>14.1f}" for a in algos)
        line += f" {statistics.median(gloo) if gloo else float('nan'):>10.1f}"
        line += "".join(f" {med['ring'] / med[a]:>12.2f}" for a in algos if a != "ring")
        lines.append(line)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--nproc", default="2",
                        help="ranks per host (default 2), or one count per host: 3,1,2")
    parser.add_argument("--delay-ms", type=float, default=1.0, help="one-way delay (default 1)")
    parser.add_argument("--loss", type=float, default=0.0)
    parser.add_argument("--rate-mb-s", type=float, default=0.0,
                        help="each host port's line rate each way, MB/s (default 0: none)")
    parser.add_argument("--repeats", type=int, default=3, help="jobs per plan (default 3)")
    parser.add_argument("--algos", default="auto", help="plans besides the flat ring "
                        "(TORCH_RING_ALGO values, comma-separated; default auto)")
    parser.add_argument("--json", help="write every job's rows here")
    parser.add_argument("--timeout-s", type=int, default=900, help="per job (default 900)")
    parser.add_argument("bench", nargs="*", help="torch_ring_backend.bench arguments (default: "
                        "-b 4K -e 64M --iters 10 --warmup 3 --reference gloo)")
    args = parser.parse_args()
    nprocs = [int(x) for x in args.nproc.split(",")]
    if len(nprocs) == 1:
        nprocs *= args.hosts
    if len(nprocs) != args.hosts or min(nprocs) < 1:
        parser.error(f"--nproc: {args.nproc!r} is not one count, or one per host ({args.hosts})")
    bench = args.bench or ["-b", "4K", "-e", "64M", "--iters", "10", "--warmup", "3"]
    if "--reference" not in bench:
        bench += ["--reference", "gloo"]
    algos = ["ring"] + [a for a in args.algos.split(",") if a and a != "ring"]
    tag = uuid.uuid4().hex[:6]
    namespaces = [f"ringh{i}{tag}" for i in range(args.hosts)]
    created, switch = [], None
    results = {a: [] for a in algos}
    try:
        for ns in namespaces:
            subprocess.run(["ip", "netns", "add", ns], check=True)
            created.append(ns)
            subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"],
                           check=True)
        switch = EmulatedSwitch(namespaces, args.delay_ms, args.loss, rate_mb_s=args.rate_mb_s)
        print(f"# {switch.describe()}; ranks per host {args.nproc}; bench {' '.join(bench)}",
              flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.repeats):
                for k, algo in enumerate(algos):
                    out = os.path.join(tmp, f"{algo}.{rep}.json")
                    rows = run_job(switch, namespaces, nprocs, algo, bench,
                                   29600 + (rep * len(algos) + k) % 300, out, args.timeout_s)
                    results[algo].append(rows)
                    print(f"# job {rep + 1}/{args.repeats} {algo}: done", flush=True)
        print(table(results, algos))
        if args.json:
            with open(args.json, "w") as f:
                # "nproc" as the model's --compare reads it: one count (equal hosts) or a list.
                nproc = nprocs[0] if len(set(nprocs)) == 1 else nprocs
                json.dump({"hosts": args.hosts, "nproc": nproc, "delay_ms": args.delay_ms,
                           "rate_mb_s": args.rate_mb_s, "bench": bench, "jobs": results},
                          f, indent=1)
        return 0
    finally:
        if switch is not None:
            switch.close()
        for ns in created:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
