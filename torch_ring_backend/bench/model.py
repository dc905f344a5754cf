"""A scale model of all_reduce plans (issue 27): each plan's time from per-link latency (alpha,
seconds) and bandwidth (beta, bytes per second), for ranks grouped into hosts, so that the
plans can be compared at sizes no machine here can run (2-1024 ranks, 1-128 hosts).

    python -m torch_ring_backend.bench.model                       # the default table
    python -m torch_ring_backend.bench.model --sizes 4K,1M --ranks-per-host 8 \\
        --intra 2e-6,10e9 --inter 25e-6,1.25e9

Every step of a plan costs alpha + bytes / beta of the link it crosses. A step that crosses
hosts while R flows share each host's network link gets beta / R. The plans:

  flat      the ring over every rank as today: 2(n-1) steps of S/n bytes, each as slow as its
            slowest link (a ring over several hosts crosses the network in every step, since
            every step waits for the slowest hop).
  hier-ring shared memory inside each host (reduce-scatter: L-1 steps of S/L), then for each
            local rank a ring over the hosts on its shard (2(H-1) steps of S/(L*H)); the L
            rings of a host share its network link; then an all-gather inside each host.
  hier-rd   the same inside each host, and recursive doubling between hosts on the shards
            (log2 H steps of the whole shard; a host count that is not a power of two adds
            two steps: the extra hosts fold their shard into a partner first and get the
            result back last), for small messages.

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


def flat_ring(size, hosts, per_host, intra=DEFAULT_INTRA, inter=DEFAULT_INTER):
    """Seconds for the ring over every rank: 2(n-1) steps of size/n bytes at the pace of its
    slowest link (the network as soon as there are two hosts)."""
    n = hosts * per_host
    if n == 1:
        return 0.0
    link = inter if hosts > 1 else intra
    return 2 * (n - 1) * _step(size / n, link)


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


PLANS = {"flat": flat_ring, "hier-ring": hier_ring, "hier-rd": hier_rd}


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
    a = p.parse_args(argv)
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
