"""A model of ring's CPU all_reduce on one host when each rank's large calls are split into C
channels run by C of its cores (issue 72, not built yet): busbw against C from per-core rates
measured on any machine, a NUMA node's memory bandwidth and the link between nodes, so that
the gain can be judged on the big nodes users run on before anything is built for them.

    python -m torch_ring_backend.bench.channels_model
    python -m torch_ring_backend.bench.channels_model --ranks 2 --nodes 2 --reduce 9e9 \\
        --copy 12e9 --memory 200e9 --link 50e9 --sizes 1M,32M,256M --channels 1,2,4,8,16,32

The ring all_reduce of S bytes over L ranks moves 2(L-1) slices of S/L through each rank: L-1
combines (reduce-scatter: a slot received plus the rank's own part into the next slot) and
L-1 copies (all-gather: a slot received to the output and to the next slot). With C channels
each rank splits every slice into C parts that C of its cores handle at once. A call's time is
the longest of what bounds it, plus the latencies it pays in sequence:

  cores    (L-1)/L * S * (1/reduce + 1/copy) / C        reduce, copy: one core's bytes per
                                                         second for a step's payload
  memory   (L/N) * k * 2(L-1)/L * S / memory            each of a node's L/N ranks makes k
                                                         bytes of memory traffic per payload
                                                         byte (k = 3: read the input or the
                                                         slot, write the output or the slot,
                                                         and the line the peer reads back)
  link     2(L-1)/L * S / link  (N >= 2)                 ranks in blocks (docs/numa.md): the
                                                         ring crosses between nodes N times,
                                                         each crossing one direction of a link
                                                         carrying every step of one hop
  latency  2(L-1) * loops * alpha + wake (C > 1)         loops = ceil(S / (L * C * slot)):
                                                         each channel pipelines its own parts;
                                                         wake: the helpers' futex wake-up

busbw = 2(L-1)/L * S / time, the nccl-tests convention.
"""
import argparse
import math

# Defaults: one core's step rates as measured on this project's machine (docs/cpu_channels.md:
# ring's own world-2 all_reduce at 32-64 MiB, one core per rank, ran at 10.3-11.5 GB/s busbw,
# which the model's C = 1 gives with 11 GB/s for each kind of step), and a two-socket Xeon
# (Sapphire Rapids): 8 DDR5-4800 channels per socket (307 GB/s peak, about 200 sustained), UPI
# links carrying about 50 GB/s per direction between the sockets.
DEFAULT_REDUCE = 11e9
DEFAULT_COPY = 11e9
DEFAULT_MEMORY = 200e9
DEFAULT_LINK = 50e9
DEFAULT_ALPHA = 1e-6
DEFAULT_WAKE = 5e-6
DEFAULT_SLOT = 256 * 1024
TRAFFIC_PER_BYTE = 3


def all_reduce_seconds(size, ranks, nodes, channels, reduce=DEFAULT_REDUCE, copy=DEFAULT_COPY,
                       memory=DEFAULT_MEMORY, link=DEFAULT_LINK, alpha=DEFAULT_ALPHA,
                       wake=DEFAULT_WAKE, slot=DEFAULT_SLOT, traffic=TRAFFIC_PER_BYTE):
    """Seconds for one all_reduce of `size` bytes; returns (time, what bounds it)."""
    if ranks < 2:
        return 0.0, "one rank"
    moved = 2 * (ranks - 1) / ranks * size  # payload bytes through each rank
    bounds = {
        "cores": (ranks - 1) / ranks * size * (1 / reduce + 1 / copy) / channels,
        "memory": (ranks / nodes) * traffic * moved / memory,
    }
    if nodes >= 2:
        bounds["link"] = moved / link
    loops = max(1, math.ceil(size / (ranks * channels * slot)))
    latency = 2 * (ranks - 1) * loops * alpha + (wake if channels > 1 else 0.0)
    what = max(bounds, key=bounds.get)
    return bounds[what] + latency, what


def busbw(size, ranks, seconds):
    return 2 * (ranks - 1) / ranks * size / seconds if seconds > 0 else float("inf")


def _size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def _label(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def table(sizes, channels, **kw):
    """Markdown: busbw in GB/s per size (rows) and channel count (columns), the bound in brackets
    (c: cores, m: memory, l: link)."""
    head = "| size | " + " | ".join(f"C = {c}" for c in channels) + " |"
    lines = [head, "|---|" + "---|" * len(channels)]
    for s in sizes:
        cells = []
        for c in channels:
            t, what = all_reduce_seconds(s, channels=c, **kw)
            cells.append(f"{busbw(s, kw['ranks'], t) / 1e9:.1f} ({what[0]})")
        lines.append(f"| {_label(s)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--nodes", type=int, default=2, help="NUMA nodes the ranks are spread over")
    p.add_argument("--reduce", type=float, default=DEFAULT_REDUCE,
                   help="one core's bytes/s for a combine step (ring_combine_bench)")
    p.add_argument("--copy", type=float, default=DEFAULT_COPY,
                   help="one core's bytes/s for a copy step (to the output and the next slot)")
    p.add_argument("--memory", type=float, default=DEFAULT_MEMORY, help="bytes/s per node")
    p.add_argument("--link", type=float, default=DEFAULT_LINK,
                   help="bytes/s per direction between nodes")
    p.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="seconds per step")
    p.add_argument("--wake", type=float, default=DEFAULT_WAKE,
                   help="seconds to wake a call's helpers (C > 1)")
    p.add_argument("--slot", type=_size, default=DEFAULT_SLOT)
    p.add_argument("--sizes", default="1M,4M,16M,32M,64M,256M")
    p.add_argument("--channels", default="1,2,4,8,16,32")
    a = p.parse_args(argv)
    sizes = [_size(s) for s in a.sizes.split(",")]
    channels = [int(c) for c in a.channels.split(",")]
    print(f"# all_reduce busbw (GB/s), {a.ranks} ranks over {a.nodes} node(s); per core: reduce "
          f"{a.reduce / 1e9:g} GB/s, copy {a.copy / 1e9:g} GB/s; memory {a.memory / 1e9:g} GB/s "
          f"per node, link {a.link / 1e9:g} GB/s per direction")
    print(table(sizes, channels, ranks=a.ranks, nodes=a.nodes, reduce=a.reduce, copy=a.copy,
                memory=a.memory, link=a.link, alpha=a.alpha, wake=a.wake, slot=a.slot))


if __name__ == "__main__":
    main()
