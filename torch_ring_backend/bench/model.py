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
            slices goes around in pipeline loops, each such a chain again (a loop's steps wait
            on each other), or the slowest link's 2(n-1) slices one after another where those
            take longer. (The first version of this model priced every hop at the network's
            cost; the flat ring on 4 emulated hosts of 2 ranks took 9.7 ms at 4 KiB, where
            that gave 17.7 ms and the chain gives 9.1. The second priced every loop after the
            first that way, 1.2-1.6x the measured time from 8 MiB: docs/scale.md.)
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

On hosts of unequal size (--ranks-per-host 3,1,2) the two-level all_reduce with a ring cuts the
buffer at every host's chunk edges, and each segment's owners, one per host, all-reduce it
between hosts; the one-rank host of 3+1+2 owns every segment and takes them one after another
(_segmented). The rounds and the direct round there go through one rank per host: a chain
reduces each host's message to it, and another takes the result down (_leaders_all_reduce).

all_gather and reduce_scatter (--collective) have flat, hier-ring and hier-direct: on hosts of
equal size by local index, on hosts of unequal size (--ranks-per-host 3,1,2) through one rank
per host on blocks padded to the widest host W: a ring all_gather inside each host (for
reduce_scatter, a chain reducing all H*W parts to the leader), the leaders' ring or direct
round on blocks of W parts, then a chain down each host.

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
    """Seconds for the ring over every rank: each pipeline loop a chain of 2(n-1) hops
    (hosts/n of them over the network), or the slowest link's 2(n-1) slices one after another
    where those take longer (_ring_chain)."""
    n = sum(_counts(hosts, per_host)[0])
    return _ring_chain(2 * (n - 1), size / n, hosts, n, intra, inter, slot)


def _ring_chain(hops, chunk, hosts, n, intra, inter, slot):
    # A ring of `hops` steps of `chunk` bytes each over every rank (n of them, a host's ranks
    # neighbours on the ring), in pipeline loops of one piece per step. The executor runs a
    # loop's steps in order (csrc/schedule/ring_plan.h), and step k of a loop waits for the
    # previous rank's step k-1 of the same loop: so every loop is a chain of `hops` dependent
    # hops, hosts/n of them over the network, and the next loop starts where it ends. A loop
    # also cannot take less than the slowest link's `hops` pieces, one after another. So each
    # loop costs the longer of the two.
    if n == 1:
        return 0.0
    piece = min(chunk, slot)
    loops = max(1, math.ceil(chunk / slot))
    slowest = inter if hosts > 1 else intra
    network_hops = hops * hosts / n if hosts > 1 else 0
    chain = network_hops * _step(piece, inter) + (hops - network_hops) * _step(piece, intra)
    through_slowest = hops * piece / slowest[1]
    return loops * max(chain, through_slowest)


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


def _between(plan, shard, size, hosts, sharing, inter, slot=DEFAULT_SLOT, max_radix=None):
    # One shard's all-reduce between hosts under `plan`, each host's link shared by `sharing`
    # flows. `size` is the whole message (auto's rounds are bounded by it).
    if plan == "hier-ring":
        return _pipelined(2 * (hosts - 1), shard / hosts, inter, sharing, slot)
    # A round (and the direct round, the one round of H) goes slot by slot in lock step
    # (csrc/executor/direct_collectives.cc): a rank sends its next slice only once it has every
    # peer's last, so each slice is a round of its own and pays the latency. Folding a host in
    # or out streams the shard down one link, one step.
    piece, loops = min(shard, slot), max(1, math.ceil(shard / slot))
    if plan in ("hier-rd", "hier-radix"):
        if plan == "hier-rd":
            power = 1 << (hosts.bit_length() - 1)
            radices, folded = [2] * int(math.log2(power)), power != hosts
        else:
            radices, folded = radix_schedule(hosts, max_radix or auto_radix(size, hosts))
        rounds = loops * sum(_step(piece * (r - 1), inter, sharing=sharing) for r in radices)
        return rounds + (2 * _step(shard, inter, sharing=sharing) if folded else 0.0)
    if plan == "hier-direct":
        return loops * _step(piece * (hosts - 1), inter, sharing=sharing)
    raise ValueError(f"no plan between hosts named {plan!r}")


def _two_levels(plan, size, hosts, per_host, intra, inter, slot=DEFAULT_SLOT, max_radix=None):
    # Shared memory inside each host around `plan` between hosts. On hosts of equal size every
    # rank all-reduces its shard S/L between hosts at once; on hosts of unequal size, _segmented
    # (the ring) or _leaders_all_reduce (rounds, the direct round).
    counts, unequal = _counts(hosts, per_host)
    if unequal and plan == "hier-ring":
        return _segmented(size, counts, intra, inter, slot)
    if unequal:
        return _leaders_all_reduce(plan, size, counts, intra, inter, slot, max_radix)
    per_host = counts[0]
    inner = _intra_phases(size, per_host, intra, slot)
    if hosts == 1:
        return inner
    return inner + _between(plan, size / per_host, size, hosts, per_host, inter, slot, max_radix)


def _segmented(size, counts, intra, inter, slot=DEFAULT_SLOT):
    """Seconds for the two-level all_reduce with a ring between hosts of unequal size
    (csrc/executor/hier_all_reduce.cc, schedule/host_layout.h): each host reduce-scatters its
    chunks (L_h - 1 steps of S/L_h); the buffer is cut at every host's chunk edges, and each
    segment is all-reduced between hosts by its owners, one per host, each owner taking its
    segments in increasing order once its own host's half is done; then each host
    all-gathers. A segment starts when the last of its owners is free, so the time is the
    longest chain through the segments: on 3+1+2 hosts the one-rank host owns every segment
    and does them one after another. Each host's link is priced as shared by the widest
    host's ranks (the most flows that can cross one host's link at once)."""
    from fractions import Fraction
    hosts, sharing = len(counts), max(counts)
    half = [_pipelined(c - 1, size / c, intra, 1, slot) if c > 1 else 0.0 for c in counts]
    free = {(h, j): half[h] for h, c in enumerate(counts) for j in range(c)}
    edges = sorted({Fraction(size) * j / c for c in counts for j in range(c + 1)})
    for lo, hi in zip(edges, edges[1:]):
        # The chunk of each host that holds the segment: its owner there.
        owners = [(h, min(int((lo + hi) / 2 * c / size), c - 1)) for h, c in enumerate(counts)]
        done = max(free[o] for o in owners) + _between("hier-ring", float(hi - lo), size, hosts,
                                                        sharing, inter, slot)
        for o in owners:
            free[o] = done
    return max(free[(h, j)] + half[h] for h, c in enumerate(counts) for j in range(c))


def _leaders_all_reduce(plan, size, counts, intra, inter, slot=DEFAULT_SLOT, max_radix=None):
    """Seconds for rounds or the direct round on hosts of unequal size, through one rank per
    host (csrc/executor/hier_all_reduce.cc): a chain of each host's ranks reduces the whole
    message to its leader (the widest host's chain is the longest), the leaders all-reduce it
    under `plan` with one flow per host, and a chain takes it down again."""
    inside = max(_chain(size, c - 1, intra, slot) for c in counts)
    return inside + _between(plan, size, size, len(counts), 1, inter, slot, max_radix) + inside


def hier_ring(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER, slot=DEFAULT_SLOT):
    """Seconds for shared memory inside each host and one ring per local rank between hosts
    (each ring in slot-sized pieces, as the flat ring: on one host the two are the same plan
    and cost the same)."""
    return _two_levels("hier-ring", size, hosts, per_host, intra, inter, slot)


def hier_rd(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Seconds for shared memory inside each host and recursive doubling between hosts."""
    return _two_levels("hier-rd", size, hosts, per_host, intra, inter)


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
    return _two_levels("hier-radix", size, hosts, per_host, intra, inter, max_radix=max_radix)


def hier_direct(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Seconds for shared memory inside each host and one direct round between hosts."""
    return _two_levels("hier-direct", size, hosts, per_host, intra, inter)


# Ties name the plan listed first: hier-radix's schedule may be hier-rd's or hier-direct's.
PLANS = {"flat": flat_ring, "hier-ring": hier_ring, "hier-rd": hier_rd,
         "hier-direct": hier_direct, "hier-radix": hier_radix}


# all_gather and reduce_scatter (csrc/executor/hier_gather_scatter.h). S is the whole gathered
# output / reduce_scatter input (as torch-ring-bench counts it), so each rank's part is P = S/n.
# On hosts of equal size the reduce_scatter plans are the all_gather plans run backwards: the
# same steps of the same sizes, so the same times (the reductions' cost is not modelled).
# per_host may also be a list, one count per host: where the counts differ, the two-level
# plans go through one rank per host (the leaders), on blocks padded to the widest host
# (_leaders_gather, _leaders_scatter).

def _counts(hosts, per_host):
    # (counts per host, whether they differ) for an int or a list of counts.
    if isinstance(per_host, (list, tuple)):
        if len(per_host) != hosts or min(per_host) < 1:
            raise ValueError(f"{hosts} hosts but ranks per host {list(per_host)}")
        return list(per_host), len(set(per_host)) > 1
    return [per_host] * hosts, False


def _chain(nbytes, hops, link, slot=DEFAULT_SLOT):
    # A chain of `hops` ranks passing `nbytes` on in slot-sized pieces (planBroadcast,
    # planReduce): the last piece leaves the first rank after loops - 1 pieces and takes
    # `hops` steps to the end.
    if hops <= 0:
        return 0.0
    piece = min(nbytes, slot)
    loops = max(1, math.ceil(nbytes / slot))
    return (hops + loops - 1) * _step(piece, link)


def _leaders_between(block, hosts, direct, inter, slot=DEFAULT_SLOT):
    # The leaders' step between hosts, one block of W parts per host: a ring of H-1 steps, or
    # one direct round of H-1 blocks (the same in both directions).
    if direct:
        return _step(block * (hosts - 1), inter)
    return _pipelined(hosts - 1, block, inter, 1, slot)


def _leaders_gather(size, counts, direct, intra, inter, slot=DEFAULT_SLOT):
    """Seconds for all_gather through the leaders: a ring all_gather inside each host (its
    largest host's), the leaders' all_gather of W parts per host (a ring of H-1 steps, or one
    direct round of H-1 blocks), then each leader's chain down its host of all H*W parts."""
    hosts, widest = len(counts), max(counts)
    part = size / sum(counts)
    inside = max(_pipelined(c - 1, part, intra, 1, slot) if c > 1 else 0.0 for c in counts)
    block = widest * part
    between = _leaders_between(block, hosts, direct, inter, slot)
    down = max(_chain(hosts * block, c - 1, intra, slot) for c in counts)
    return inside + between + down


def _leaders_scatter(size, counts, direct, intra, inter, slot=DEFAULT_SLOT):
    """Seconds for reduce_scatter through the leaders: a chain reducing the padded H*W parts
    to each leader, the leaders' reduce_scatter (a ring of H-1 steps of W parts, or one direct
    round), then each leader's chain down its host of its W parts."""
    hosts, widest = len(counts), max(counts)
    part = size / sum(counts)
    block = widest * part
    up = max(_chain(hosts * block, c - 1, intra, slot) for c in counts)
    between = _leaders_between(block, hosts, direct, inter, slot)
    down = max(_chain(block, c - 1, intra, slot) for c in counts)
    return up + between + down


def flat_gather(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER, slot=DEFAULT_SLOT):
    """Seconds for the flat ring all_gather (or reduce_scatter): n-1 hops of P."""
    n = sum(_counts(hosts, per_host)[0])
    return _ring_chain(n - 1, size / n, hosts, n, intra, inter, slot)


def _intra_gather(size, hosts, per_host, intra, slot=DEFAULT_SLOT):
    # Inside each host: a ring of L-1 steps, each of the H parts one local rank holds, in slots.
    return _pipelined(per_host - 1, size / per_host, intra, 1, slot) if per_host > 1 else 0.0


def hier_ring_gather(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER,
                     slot=DEFAULT_SLOT):
    """Seconds for the ranks of each local index in a ring between hosts (H-1 steps of P, L
    rings sharing each host's link), then the ring inside each host, both in slots. Hosts of
    unequal size: the leaders' ring (_leaders_gather)."""
    counts, unequal = _counts(hosts, per_host)
    if unequal:
        return _leaders_gather(size, counts, False, intra, inter, slot)
    per_host = counts[0]
    part = size / (hosts * per_host)
    between = _pipelined(hosts - 1, part, inter, per_host, slot) if hosts > 1 else 0.0
    return between + _intra_gather(size, hosts, per_host, intra, slot)


def hier_direct_gather(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Seconds for one direct round between hosts (H-1 parts through each rank's link, L ranks
    sharing it), then the ring inside each host (reduce_scatter: the ring inside first).
    Hosts of unequal size: the leaders' direct round (_leaders_gather)."""
    counts, unequal = _counts(hosts, per_host)
    if unequal:
        return _leaders_gather(size, counts, True, intra, inter)
    per_host = counts[0]
    part = size / (hosts * per_host)
    between = _step(part * (hosts - 1), inter, sharing=per_host) if hosts > 1 else 0.0
    return between + _intra_gather(size, hosts, per_host, intra)


def hier_ring_scatter(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER,
                      slot=DEFAULT_SLOT):
    """hier_ring_gather backwards on hosts of equal size; the leaders' ring (_leaders_scatter)
    on hosts of unequal size."""
    counts, unequal = _counts(hosts, per_host)
    if unequal:
        return _leaders_scatter(size, counts, False, intra, inter, slot)
    return hier_ring_gather(size, hosts, counts[0], intra, inter, slot)


def hier_direct_scatter(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """hier_direct_gather backwards on hosts of equal size; the leaders' direct round
    (_leaders_scatter) on hosts of unequal size."""
    counts, unequal = _counts(hosts, per_host)
    if unequal:
        return _leaders_scatter(size, counts, True, intra, inter)
    return hier_direct_gather(size, hosts, counts[0], intra, inter)


GATHER_PLANS = {"flat": flat_gather, "hier-ring": hier_ring_gather,
                "hier-direct": hier_direct_gather}
SCATTER_PLANS = {"flat": flat_gather, "hier-ring": hier_ring_scatter,
                 "hier-direct": hier_direct_scatter}
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
    counts, unequal = _counts(hosts, per_host)
    if collective != "all_reduce" and unequal:
        # Unequal hosts (plan_choice.cc, chooseThroughLeaders): the leaders' direct round
        # while it sends at most the budget (W parts to each of H-1 hosts), else the flat ring.
        part = size / sum(counts)
        return "hier-direct" if part * max(counts) * (hosts - 1) <= AUTO_DIRECT_BYTES else "flat"
    # Hosts of unequal size: auto prices the rings with the widest host (ring_costs.h's
    # RingShape), its byte thresholds are the same.
    per_host = max(counts)
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
    if unequal:
        # plan_choice.cc, cheapestOnUnequalHosts: the flat ring (priced as on hosts of the
        # widest size) only where strictly cheaper than the segments' chain of two levels with
        # a ring; up to the rounds' limit, the rounds where they cost no more than the best,
        # then the leaders' direct round where it costs strictly less than that.
        best, plan = flat_ring(size, hosts, per_host, intra, inter, slot), "flat"
        ring = _segmented(size, counts, intra, inter, slot)
        if ring <= best:
            best, plan = ring, "hier-ring"
        if size <= AUTO_RD_BYTES:
            radices, _ = radix_schedule(hosts, auto_radix(size, hosts))
            rounds = "hier-rd" if all(r == 2 for r in radices) else "hier-radix"
            priced = _leaders_all_reduce(rounds, size, counts, intra, inter, slot)
            if priced <= best:
                best, plan = priced, rounds
            if _leaders_all_reduce("hier-direct", size, counts, intra, inter, slot) < best:
                plan = "hier-direct"
        return plan
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
                shape = (f"{hosts}x{per_host}" if not isinstance(per_host, (list, tuple))
                         else "+".join(str(c) for c in per_host))
                rows.append((shape, algo, collective, plan, size, measured, model))
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
    p.add_argument("--ranks-per-host", default="8",
                   help="L (default 8), or one count per host (3,1,2: hosts of unequal "
                        "size; --hosts is then ignored)")
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
    counts = [int(c) for c in a.ranks_per_host.split(",")]
    if len(counts) == 1:
        shapes = [(int(h), counts[0]) for h in a.hosts.split(",")]
    else:
        shapes = [(len(counts), counts)]
    plans = PLANS_OF[a.collective]
    # "auto": what TORCH_RING_ALGO=auto runs with TORCH_RING_SHM_LINK / TORCH_RING_NET_LINK set
    # to --intra / --inter.
    print(f"{'size':>9} {'hosts':>5} {'ranks':>5} " + " ".join(f"{n + ' (ms)':>14}" for n in plans)
          + f" {'best':>11} {'flat/best':>9} {'auto':>11}")
    for size, hosts, per_host, times, best, gain in table(sizes, shapes, a.intra, a.inter,
                                                          a.collective):
        auto = auto_plan(size, hosts, per_host, a.collective, a.intra, a.inter)
        ranks = sum(_counts(hosts, per_host)[0])
        print(f"{size:>9} {hosts:>5} {ranks:>5} "
              + " ".join(f"{times[n] * 1e3:>14.3f}" for n in plans)
              + f" {best:>11} {gain:>9.1f} {auto:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
