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
  hier-radix the same inside each host, and rounds of up to k hosts between hosts
            (csrc/schedule/radix_schedule.h): in a round of r each rank sends its shard to
            the r-1 others of the round (one latency, r-1 shards through the link); hosts
            that no product of the radices covers fold in and out as in hier-rd. k is
            TORCH_RING_ALGO=auto's: 1 + 64 KiB / S (the direct round's budget per round).
            Rounds of 2 throughout are hier-rd, one round of H is hier-direct.
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


# TORCH_RING_ALGO=auto's defaults (csrc/executor/plan_choice.h): the direct round's byte budget
# (also each round's between hosts) and the largest all_reduce that takes rounds, not a ring.
AUTO_DIRECT_BYTES = 64 * 1024
AUTO_RD_BYTES = 256 * 1024

# The slot (pipeline slice) of a group that mixes shared memory and TCP (TORCH_RING_SLOT_BYTES).
DEFAULT_SLOT = 256 * 1024


def flat_ring(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER, slot=DEFAULT_SLOT):
    """Seconds for the ring over every rank: the first pipeline loop as a chain of 2(n-1) hops
    (hosts/n of them over the network), then each further loop at 2(n-1) slices through the
    slowest link; and never less than the slowest link's bytes (2(n-1)/n of the message)."""
    n = hosts * per_host
    return _ring_chain(2 * (n - 1), size / n, hosts, per_host, intra, inter, slot)


def _ring_chain(hops, chunk, hosts, per_host, intra, inter, slot):
    # A ring of `hops` steps of `chunk` bytes each over every rank: the first pipeline loop as
    # a chain of dependent hops (hosts/n of them over the network), each further loop at the
    # slowest link's pace.
    n = hosts * per_host
    if n == 1:
        return 0.0
    piece = min(chunk, slot)
    loops = max(1, math.ceil(chunk / slot))
    slowest = inter if hosts > 1 else intra
    network_hops = hops * hosts / n if hosts > 1 else 0
    chain = network_hops * _step(piece, inter) + (hops - network_hops) * _step(piece, intra)
    # Whatever the chain, the slowest link carries `hops` pieces per loop, one after another.
    through_slowest = loops * hops * piece / slowest[1]
    return max(chain + (loops - 1) * hops * _step(piece, slowest), through_slowest)


def _pipelined(hops, chunk, link, sharing=1, slot=DEFAULT_SLOT):
    # A ring of `hops` steps of `chunk` bytes over one kind of link, cut into slot-sized
    # pieces as the executor cuts it (its slice): every piece is a message, and pays the
    # latency. On one link the flat ring's chain and loops (_ring_chain) come to this.
    piece = min(chunk, slot)
    loops = max(1, math.ceil(chunk / slot))
    return loops * hops * _step(piece, link, sharing)


def _intra_phases(size, per_host, intra, slot=DEFAULT_SLOT):
    # Reduce-scatter and all-gather inside a host: (L-1) steps of S/L each, twice, in slots.
    return _pipelined(2 * (per_host - 1), size / per_host, intra, 1, slot) if per_host > 1 else 0.0


def hier_ring(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER, slot=DEFAULT_SLOT):
    """Seconds for shared memory inside each host and one ring per local rank between hosts
    (each ring in slot-sized pieces, as the flat ring: on one host the two are the same plan
    and cost the same)."""
    inner = _intra_phases(size, per_host, intra, slot)
    if hosts == 1:
        return inner
    shard = size / per_host
    # The per_host rings of a host send at once: each gets 1/per_host of the network link.
    return inner + _pipelined(2 * (hosts - 1), shard / hosts, inter, per_host, slot)


def hier_rd(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Seconds for shared memory inside each host and recursive doubling between hosts."""
    inner = _intra_phases(size, per_host, intra)
    if hosts == 1:
        return inner
    shard = size / per_host
    power = 1 << (hosts.bit_length() - 1)
    steps = int(math.log2(power)) + (2 if power != hosts else 0)
    return inner + steps * _step(shard, inter, sharing=per_host)


def radix_schedule(members, max_radix):
    """(radices, folded): csrc/schedule/radix_schedule.h's choice, written again from its
    rule: radices of 2..max_radix whose product p is at most members and at least half; the
    fewest exchanges (rounds, plus two if members - p ranks fold), then the fewest copies sent
    (the sum of r - 1), then the fewest folded."""
    if members == 1:
        return [], 0
    cap = min(max_radix, members)
    best = None

    def walk(chosen, product, top):
        nonlocal best
        if 2 * product >= members:
            key = (len(chosen) + (2 if product < members else 0),
                   sum(r - 1 for r in chosen), members - product)
            if best is None or key < best[0]:
                best = (key, list(chosen))
        if best is not None and len(chosen) + 1 > best[0][0]:
            return
        for r in range(min(top, members // product), 1, -1):
            chosen.append(r)
            walk(chosen, product * r, r)
            chosen.pop()

    walk([], 1, cap)
    radices = best[1]
    return radices, members - math.prod(radices)


def auto_radix(size, hosts):
    """The most hosts in one round that TORCH_RING_ALGO=auto allows a message of `size`."""
    if hosts <= 2:
        return 2
    if size <= 0 or AUTO_DIRECT_BYTES // size >= hosts - 1:
        return hosts
    return max(2, 1 + AUTO_DIRECT_BYTES // int(size))


def hier_radix(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER, max_radix=None):
    """Seconds for shared memory inside each host and rounds of up to max_radix hosts between
    hosts (auto's bound for `size` when None)."""
    inner = _intra_phases(size, per_host, intra)
    if hosts == 1:
        return inner
    shard = size / per_host
    radices, folded = radix_schedule(hosts, max_radix or auto_radix(size, hosts))
    rounds = sum(_step(shard * (r - 1), inter, sharing=per_host) for r in radices)
    return inner + rounds + (2 * _step(shard, inter, sharing=per_host) if folded else 0.0)


def hier_direct(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Seconds for shared memory inside each host and one direct round between hosts."""
    inner = _intra_phases(size, per_host, intra)
    if hosts == 1:
        return inner
    shard = size / per_host
    return inner + _step(shard * (hosts - 1), inter, sharing=per_host)


# Ties name the plan listed first: hier-radix's schedule may be hier-rd's or hier-direct's.
PLANS = {"flat": flat_ring, "hier-ring": hier_ring, "hier-rd": hier_rd,
         "hier-direct": hier_direct, "hier-radix": hier_radix}


# all_gather and reduce_scatter (csrc/executor/hier_gather_scatter.h), on hosts of equal size.
# S is the whole gathered output / reduce_scatter input (as torch-ring-bench counts it), so
# each rank's part is P = S/n. The reduce_scatter plans are the all_gather plans run backwards:
# the same steps of the same sizes, so the same times (the reductions' cost is not modelled).

def flat_gather(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER, slot=DEFAULT_SLOT):
    """Seconds for the flat ring all_gather (or reduce_scatter): n-1 hops of P."""
    n = hosts * per_host
    return _ring_chain(n - 1, size / n, hosts, per_host, intra, inter, slot)


def _intra_gather(size, hosts, per_host, intra, slot=DEFAULT_SLOT):
    # Inside each host: a ring of L-1 steps, each of the H parts one local rank holds, in slots.
    return _pipelined(per_host - 1, size / per_host, intra, 1, slot) if per_host > 1 else 0.0


def hier_ring_gather(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER,
                     slot=DEFAULT_SLOT):
    """Seconds for the ranks of each local index in a ring between hosts (H-1 steps of P, L
    rings sharing each host's link), then the ring inside each host, both in slots."""
    part = size / (hosts * per_host)
    between = _pipelined(hosts - 1, part, inter, per_host, slot) if hosts > 1 else 0.0
    return between + _intra_gather(size, hosts, per_host, intra, slot)


def hier_direct_gather(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Seconds for one direct round between hosts (H-1 parts through each rank's link, L ranks
    sharing it), then the ring inside each host (reduce_scatter: the ring inside first)."""
    part = size / (hosts * per_host)
    between = _step(part * (hosts - 1), inter, sharing=per_host) if hosts > 1 else 0.0
    return between + _intra_gather(size, hosts, per_host, intra)


GATHER_PLANS = {"flat": flat_gather, "hier-ring": hier_ring_gather,
                "hier-direct": hier_direct_gather}
SCATTER_PLANS = {"flat": flat_gather, "hier-ring": hier_ring_gather,
                 "hier-direct": hier_direct_gather}
PLANS_OF = {"all_reduce": PLANS, "all_gather": GATHER_PLANS, "reduce_scatter": SCATTER_PLANS}


def best_plan(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER,
              collective="all_reduce"):
    """(name, seconds) of the fastest plan."""
    # Rounded to the picosecond: plans that are the same plan (hier-radix by rounds of 2 is
    # hier-rd) tie, and the first listed is named.
    return min(((name, plan(size, hosts, per_host, intra, inter))
                for name, plan in PLANS_OF[collective].items()),
               key=lambda item: round(item[1], 12))


def table(sizes, shapes, intra=DEFAULT_INTRA, inter=DEFAULT_INTER, collective="all_reduce"):
    """Rows (size, hosts, per_host, {plan: seconds}, best, flat / best)."""
    plans = PLANS_OF[collective]
    rows = []
    for size in sizes:
        for hosts, per_host in shapes:
            times = {name: plan(size, hosts, per_host, intra, inter) for name, plan in plans.items()}
            best = min(times, key=lambda name: round(times[name], 12))
            gain = times["flat"] / times[best] if times[best] > 0 else 1.0
            rows.append((size, hosts, per_host, times, best, gain))
    return rows


def auto_plan(size, hosts, per_host=1, collective="all_reduce", intra=DEFAULT_INTRA,
              inter=DEFAULT_INTER, slot=DEFAULT_SLOT):
    """What TORCH_RING_ALGO=auto runs (csrc/executor/plan_choice.h), to price an auto job
    (all_gather and reduce_scatter: hosts of equal size). intra / inter are the links auto
    prices the rings with (TORCH_RING_SHM_LINK / TORCH_RING_NET_LINK, default the issue's):
    past the rounds it takes the flat ring where that costs less than two levels
    (csrc/schedule/ring_costs.h has these formulas again), two levels on ties."""
    if hosts == 1:
        return "flat"
    if collective != "all_reduce" and size / (hosts * per_host) * (hosts - 1) <= AUTO_DIRECT_BYTES:
        return "hier-direct"
    if collective != "all_reduce":
        if per_host < 2:
            return "flat"
        flat = flat_gather(size, hosts, per_host, intra, inter, slot)
        two_levels = hier_ring_gather(size, hosts, per_host, intra, inter, slot)
        return "flat" if flat < two_levels else "hier-ring"
    if size * (hosts - 1) <= AUTO_DIRECT_BYTES:
        return "hier-direct"
    if size > AUTO_RD_BYTES:
        flat = flat_ring(size, hosts, per_host, intra, inter, slot)
        return "flat" if flat < hier_ring(size, hosts, per_host, intra, inter, slot) else "hier-ring"
    radices, _ = radix_schedule(hosts, auto_radix(size, hosts))
    return "hier-rd" if all(r == 2 for r in radices) else "hier-radix"


def plan_of_job(algo, size, hosts, per_host, collective):
    """The model's plan for a job run with TORCH_RING_ALGO=algo (plan_choice.h's table)."""
    if algo == "ring":
        return "flat"
    if algo == "auto":
        return auto_plan(size, hosts, per_host, collective)
    plan = algo.replace("_", "-")
    if collective != "all_reduce" and plan not in PLANS_OF[collective]:
        return "hier-ring"  # hier_rd and hier_radix are all_reduce's
    return plan


def compare(runs, intra, inter):
    """Rows (file's shape, algo, collective, plan, size, measured s, model s) for saved
    scripts/hosts_bench.py runs: each job's median per size against the model of the plan
    that job ran."""
    import statistics
    rows = []
    for run in runs:
        hosts, per_host = run["hosts"], run["nproc"]
        for algo, jobs in run["jobs"].items():
            keys = sorted({(r.get("collective", "all_reduce"), r["bytes"])
                           for job in jobs for r in job})
            for collective, size in keys:
                measured = statistics.median(
                    r["time_us"] * 1e-6 for job in jobs for r in job
                    if (r.get("collective", "all_reduce"), r["bytes"]) == (collective, size))
                plan = plan_of_job(algo, size, hosts, per_host, collective)
                model = PLANS_OF[collective][plan](size, hosts, per_host, intra, inter)
                rows.append((f"{hosts}x{per_host}", algo, collective, plan, size, measured, model))
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
    p.add_argument("--collective", default="all_reduce", choices=sorted(PLANS_OF),
                   help="the plans of which collective (default all_reduce; all_gather and "
                        "reduce_scatter on hosts of equal size, S the whole output / input)")
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
        print(f"{'shape':>5} {'job':>11} {'collective':>14} {'plan':>11} {'size':>9} "
              f"{'measured (ms)':>14} {'model (ms)':>11} {'model/measured':>15}")
        for shape, algo, coll, plan, size, measured, model in compare(runs, a.intra, a.inter):
            print(f"{shape:>5} {algo:>11} {coll:>14} {plan:>11} {size:>9} "
                  f"{measured * 1e3:>14.3f} {model * 1e3:>11.3f} {model / measured:>15.2f}")
        return 0
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    shapes = [(int(h), a.ranks_per_host) for h in a.hosts.split(",")]
    plans = PLANS_OF[a.collective]
    # "auto": what TORCH_RING_ALGO=auto runs with TORCH_RING_SHM_LINK / TORCH_RING_NET_LINK set
    # to --intra / --inter.
    print(f"{'size':>9} {'hosts':>5} {'ranks':>5} " + " ".join(f"{n + ' (ms)':>14}" for n in plans)
          + f" {'best':>11} {'flat/best':>9} {'auto':>11}")
    for size, hosts, per_host, times, best, gain in table(sizes, shapes, a.intra, a.inter,
                                                          a.collective):
        auto = auto_plan(size, hosts, per_host, a.collective, a.intra, a.inter)
        print(f"{size:>9} {hosts:>5} {hosts * per_host:>5} "
              + " ".join(f"{times[n] * 1e3:>14.3f}" for n in plans)
              + f" {best:>11} {gain:>9.1f} {auto:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
