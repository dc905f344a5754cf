"""A scale model of all_reduce plans (issue 27): each plan's time from per-link latency (alpha,
seconds) and bandwidth (beta, bytes per second), for ranks grouped into hosts, so that the
plans can be compared at sizes no machine here can run (2-1024 ranks, 1-128 hosts).

    python -m torch_ring_backend.bench.model                       # the default table
    python -m torch_ring_backend.bench.model --sizes 4K,1M --ranks-per-host 8 \\
        --intra 2e-6,10e9 --inter 25e-6,1.25e9

Every step of a plan costs alpha + bytes / beta of the link it crosses. A step that crosses
hosts while R flows share each host's network link gets beta / R. The plans:

  flat      the ring over every rank: 2(n-1) hops of S/n bytes. A message of one slice per
            chunk goes around as a chain of 2(n-1) dependent hops, of which only the fraction
            H/n crosses hosts (a host's ranks are neighbours on the ring); a message of several
            slices pipelines, and then every link carries 2(n-1) slices per pipeline loop at
            the pace of the slowest link. (The first version of this model priced every hop at
            the network's cost; the flat ring on 4 emulated hosts of 2 ranks took 9.7 ms at
            4 KiB, where that gave 17.7 ms and the chain gives 9.1: docs/scale.md.)
  hier-ring shared memory inside each host (reduce-scatter: L-1 steps of S/L), then for each
            local rank a ring over the hosts on its shard (2(H-1) steps of S/(L*H)); the L
            rings of a host share its network link; then an all-gather inside each host.
  hier-rd   the same inside each host, and recursive doubling between hosts on the shards
            (log2 H steps of the whole shard; a host count that is not a power of two adds
            two steps: the extra hosts fold their shard into a partner first and get the
            result back last), for small messages.
  hier-direct the same inside each host, and one direct round between hosts: each rank sends
            its shard to its peer on every other host at once (one latency, H-1 shards
            through the link).

L is ranks per host, H hosts, n = L * H, S the message size. The formulas are the textbook
alpha-beta costs (Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
Operations in MPICH", 2005), with the network link shared by the flows that cross it at once.
"""
import argparse
import math
import sys

# The figures: a shared-memory step on one host, and one over 10 GbE TCP.
DEFAULT_INTRA = (2e-6, 10e9)
DEFAULT_INTER = (25e-6, 1.25e9)


def _step(nbytes, link, sharing=1):
    alpha, beta = link
    return alpha + nbytes / (beta / sharing)


# The slot (pipeline slice) of a group that mixes shared memory and TCP (TORCH_RING_SLOT_BYTES).
DEFAULT_SLOT = 256 * 1024


def flat_ring(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER, slot=DEFAULT_SLOT):
    """Seconds for the ring over every rank: the first pipeline loop as a chain of 2(n-1) hops
    (hosts/n of them over the network), then each further loop at 2(n-1) slices through the
    slowest link; and never less than the slowest link's bytes (2(n-1)/n of the message)."""
    n = hosts * per_host
    if n == 1:
        return 0.0
    chunk = size / n
    piece = min(chunk, slot)
    loops = max(1, math.ceil(chunk / slot))
    hops = 2 * (n - 1)
    slowest = inter if hosts > 1 else intra
    network_hops = hops * hosts / n if hosts > 1 else 0
    chain = network_hops * _step(piece, inter) + (hops - network_hops) * _step(piece, intra)
    # Whatever the chain, the slowest link carries 2(n-1) pieces per loop, one after another.
    through_slowest = loops * hops * piece / slowest[1]
    return max(chain + (loops - 1) * hops * _step(piece, slowest), through_slowest)


def _intra_phases(size, per_host, intra):
    # Reduce-scatter and all-gather inside a host: (L-1) steps of S/L each, twice.
    return 2 * (per_host - 1) * _step(size / per_host, intra) if per_host > 1 else 0.0


def hier_ring(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Seconds for shared memory inside each host and one ring per local rank between hosts."""
    inner = _intra_phases(size, per_host, intra)
    if hosts == 1:
        return inner
    shard = size / per_host
    # The per_host rings of a host send at once: each gets 1/per_host of the network link.
    return inner + 2 * (hosts - 1) * _step(shard / hosts, inter, sharing=per_host)


def hier_rd(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Seconds for shared memory inside each host and recursive doubling between hosts."""
    inner = _intra_phases(size, per_host, intra)
    if hosts == 1:
        return inner
    shard = size / per_host
    power = 1 << (hosts.bit_length() - 1)
    steps = int(math.log2(power)) + (2 if power != hosts else 0)
    return inner + steps * _step(shard, inter, sharing=per_host)


def hier_direct(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Seconds for shared memory inside each host and one direct round between hosts."""
    inner = _intra_phases(size, per_host, intra)
    if hosts == 1:
        return inner
    shard = size / per_host
    return inner + _step(shard * (hosts - 1), inter, sharing=per_host)


PLANS = {"flat": flat_ring, "hier-ring": hier_ring, "hier-rd": hier_rd,
         "hier-direct": hier_direct}


def best_plan(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """(name, seconds) of the fastest plan."""
    return min(((name, plan(size, hosts, per_host, intra, inter)) for name, plan in PLANS.items()),
               key=lambda item: item[1])


def table(sizes, shapes, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Rows (size, hosts, per_host, {plan: seconds}, best, flat / best)."""
    rows = []
    for size in sizes:
        for hosts, per_host in shapes:
            times = {name: plan(size, hosts, per_host, intra, inter) for name, plan in PLANS.items()}
            best = min(times, key=times.get)
            gain = times["flat"] / times[best] if times[best] > 0 else 1.0
            rows.append((size, hosts, per_host, times, best, gain))
    return rows


# TORCH_RING_ALGO=auto's defaults (csrc/executor/plan_choice.h), to price what an auto job ran.
AUTO_DIRECT_BYTES = 64 * 1024
AUTO_RD_BYTES = 256 * 1024


def auto_plan(size, hosts):
    if hosts == 1:
        return "flat"
    if size * (hosts - 1) <= AUTO_DIRECT_BYTES:
        return "hier-direct"
    return "hier-rd" if size <= AUTO_RD_BYTES else "hier-ring"


def compare(runs, intra, inter):
    """Rows (file's shape, algo, size, measured s, model s) for saved scripts/hosts_bench.py
    runs: each job's median per size against the model of the plan that job ran."""
    import statistics
    rows = []
    for run in runs:
        hosts, per_host = run["hosts"], run["nproc"]
        for algo, jobs in run["jobs"].items():
            sizes = sorted({r["bytes"] for job in jobs for r in job})
            for size in sizes:
                measured = statistics.median(r["time_us"] * 1e-6 for job in jobs for r in job
                                             if r["bytes"] == size)
                plan = {"ring": "flat", "auto": auto_plan(size, hosts)}.get(
                    algo, algo.replace("_", "-"))
                rows.append((f"{hosts}x{per_host}", algo, plan, size, measured,
                             PLANS[plan](size, hosts, per_host, intra, inter)))
    return rows


def _link(text):
    alpha, beta = (float(x) for x in text.split(","))
    if alpha < 0 or beta <= 0:
        raise argparse.ArgumentTypeError(f"expected ALPHA_S,BETA_BYTES_PER_S, got {text!r}")
    return alpha, beta


def main(argv=None):
    from .options import parse_size
    p = argparse.ArgumentParser(prog="python -m torch_ring_backend.bench.model",
                                description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4K,1M,64M", help="message sizes (default 4K,1M,64M)")
    p.add_argument("--ranks-per-host", type=int, default=8, help="L (default 8)")
    p.add_argument("--hosts", default="1,2,4,16,128", help="host counts (default 1,2,4,16,128)")
    p.add_argument("--intra", type=_link, default=DEFAULT_INTRA,
                   help="shared-memory step: alpha seconds,beta bytes/s (default 2e-6,10e9)")
    p.add_argument("--inter", type=_link, default=DEFAULT_INTER,
                   help="network step: alpha seconds,beta bytes/s (default 25e-6,1.25e9)")
    p.add_argument("--compare", nargs="+", metavar="JSON",
                   help="instead of the table: saved scripts/hosts_bench.py --json runs, each "
                        "size's measured median against the model with --intra/--inter")
    a = p.parse_args(argv)
    if a.compare:
        import json
        runs = []
        for path in a.compare:
            with open(path) as f:
                runs.append(json.load(f))
        print(f"{'shape':>5} {'job':>11} {'plan':>11} {'size':>9} {'measured (ms)':>14} "
              f"{'model (ms)':>11} {'model/measured':>15}")
        for shape, algo, plan, size, measured, model in compare(runs, a.intra, a.inter):
            print(f"{shape:>5} {algo:>11} {plan:>11} {size:>9} {measured * 1e3:>14.3f} "
                  f"{model * 1e3:>11.3f} {model / measured:>15.2f}")
        return 0
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    shapes = [(int(h), a.ranks_per_host) for h in a.hosts.split(",")]
    print(f"{'size':>9} {'hosts':>5} {'ranks':>5} " + " ".join(f"{n + ' (ms)':>14}" for n in PLANS)
          + f" {'best':>9} {'flat/best':>9}")
    for size, hosts, per_host, times, best, gain in table(sizes, shapes, a.intra, a.inter):
        print(f"{size:>9} {hosts:>5} {hosts * per_host:>5} "
              + " ".join(f"{times[n] * 1e3:>14.3f}" for n in PLANS) + f" {best:>9} {gain:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
