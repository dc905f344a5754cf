"""nccl-tests-style benchmark: the "ring" backend and the reference backend side by side, one run.

    python -m torch_ring_backend.bench                            # all_reduce, 2 local ranks, CPU
    python -m torch_ring_backend.bench --nproc 4 --max-bytes 16M --collectives all_reduce,all_gather
    python -m torch_ring_backend.bench --json out.json --csv out.csv --plot out.png
    torchrun --nproc_per_node 2 -m torch_ring_backend.bench       # ranks from torchrun
    python -m torch_ring_backend.bench --device cuda              # nccl as the reference

Every rank joins two process groups over the same ranks: "ring" (the default group) and the
reference (gloo on CPU, nccl on CUDA). Each collective is measured at every size (doubling from
--min-bytes to --max-bytes) with the same inputs on both: ring's whole sweep first, then the
reference's (see _sweep). Columns (REFERENCE.md section 6):

  size     bytes of the full array: the all_gather output, the reduce_scatter input
  time     microseconds per call: `iters` back-to-back calls after a barrier, slowest rank
  algbw    size / time, GB/s (1e9 bytes)
  busbw    algbw x 2(n-1)/n for all_reduce; x (n-1)/n for all_gather, reduce_scatter and
           all_to_all; x 1 for broadcast. Comparable across world sizes and with link speed.
  roof%    busbw as a percentage of this machine's memory-copy bandwidth: bytes per second one
           process copies between two 256 MiB buffers, the faster of torch's copy_ and memcpy.
           The ceiling of a shared-memory transport, whose every step is such a copy.
  #wrong   output elements that differ from the closed-form expected result, over all ranks.
           Inputs are small integers, so every reduction order gives the same exact result.
  ratio    ring busbw / reference busbw (equally: reference time / ring time)
"""
import argparse
import csv
import ctypes
import datetime
import functools
import importlib.util
import json
import math
import operator
import os
import platform
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

import torch_ring_backend
from torch_ring_backend._launch import RankFailed, run_on_local_ranks

PROG = "torch-ring-bench"
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int32": torch.int32, "int64": torch.int64,
    "int8": torch.int8, "uint8": torch.uint8,
}
OPS = {
    "sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN, "product": dist.ReduceOp.PRODUCT,
}
REFERENCE_CHOICES = ("auto", "gloo", "nccl", "none")
# torch 2.14 renamed all_gather_into_tensor and reduce_scatter_tensor (the old names warn on
# every call); older torch has only the old names.
ALL_GATHER_SINGLE = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER_SINGLE = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

# Large messages are bandwidth-bound and steady, so a few calls measure them well; capping the
# bytes moved per measurement keeps a sweep to 64 MiB under a minute even on gloo.
BYTES_PER_MEASUREMENT = 256 * MiB
ROOFLINE_BYTES = 256 * MiB
ROOFLINE_REPEATS = 5
# Per rank at the largest size: input, output, expected result, and the backend's own staging.
BUFFERS_PER_RANK = 4
GROUP_TIMEOUT = datetime.timedelta(minutes=5)


class BadInput(Exception):
    """A problem with the command line or the environment: one line on stderr, exit code 2."""


# ---- command line ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    collectives: tuple
    min_bytes: int
    max_bytes: int
    dtype: str
    op: str
    inplace: bool
    warmup: int
    iters: int
    reference: str  # "gloo", "nccl" or "none" ("auto" resolved)
    device: str
    nproc: int
    json_path: str = None
    csv_path: str = None
    plot_path: str = None


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print the usage block; one line is enough
        raise BadInput(f"{message} (see --help)")


def parse_size(text):
    """'8', '4K', '64M', '1G', '16MiB', '512kb' -> bytes (binary multiples, as nccl-tests)."""
    s = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": KiB, "M": MiB, "G": GiB}.get(s[-1:], 1)
    digits = s[:-1] if scale > 1 else s
    try:
        value = int(digits)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"cannot read size {text!r}: expected a whole number of bytes with an optional "
            "K, M or G suffix, e.g. 8, 4K, 64M") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size {text!r} must be positive")
    return value * scale


def _parse_collectives(text):
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in COLLECTIVES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown collective {', '.join(map(repr, unknown)) or repr(text)} "
            f"(choose from {', '.join(COLLECTIVES)}, comma-separated)")
    return tuple(dict.fromkeys(names))  # drop repeats, keep order


def _count(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _build_parser():
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0],
                epilog="Columns: python -m pydoc torch_ring_backend.bench")
    p.add_argument("--nproc", type=_count, default=2,
                   help="local ranks to launch (default 2; ignored under torchrun)")
    p.add_argument("--collectives", type=_parse_collectives, default=("all_reduce",),
                   help=f"comma-separated list of {', '.join(COLLECTIVES)} (default all_reduce)")
    p.add_argument("-b", "--min-bytes", type=parse_size, default=8,
                   help="smallest size (default 8)")
    p.add_argument("-e", "--max-bytes", type=parse_size, default=64 * MiB,
                   help="largest size (default 64M); sizes double from the smallest")
    p.add_argument("--dtype", choices=DTYPES, default="float32",
                   help="element type (default float32)")
    p.add_argument("--op", choices=OPS, default="sum",
                   help="reduction of all_reduce and reduce_scatter (default sum)")
    place = p.add_mutually_exclusive_group()
    place.add_argument("--inplace", dest="inplace", action="store_true",
                       help="all_gather/reduce_scatter with the input as a block of the output")
    place.add_argument("--out-of-place", dest="inplace", action="store_false",
                       help="separate input and output (default)")
    p.add_argument("--warmup", type=_count, default=5, help="untimed calls per size (default 5)")
    p.add_argument("--iters", type=_count, default=50,
                   help=f"timed calls per size (default 50; fewer above "
                        f"{BYTES_PER_MEASUREMENT // MiB // 50} MiB so that each size moves about "
                        f"{BYTES_PER_MEASUREMENT // MiB} MiB, at least 2)")
    p.add_argument("--reference", choices=REFERENCE_CHOICES, default="auto",
                   help="backend to compare with (default auto: gloo on cpu, nccl on cuda)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="tensor device; cuda: rank r uses cuda:(r %% device_count)")
    p.add_argument("--json", dest="json_path", metavar="PATH", help="write every row as JSON")
    p.add_argument("--csv", dest="csv_path", metavar="PATH", help="write every row as CSV")
    p.add_argument("--plot", dest="plot_path", metavar="PATH.png",
                   help="draw busbw against size (needs matplotlib)")
    return p


def parse_config(argv=None):
    """The command line, checked against this machine. Raises BadInput."""
    a = _build_parser().parse_args(argv)
    if a.nproc < 1:
        raise BadInput(f"--nproc must be at least 1, got {a.nproc}")
    if a.iters < 1 or a.warmup < 0:
        raise BadInput(f"--iters must be at least 1 and --warmup at least 0 "
                       f"(got {a.iters} and {a.warmup})")
    if a.min_bytes > a.max_bytes:
        raise BadInput(f"--min-bytes {a.min_bytes} is larger than --max-bytes {a.max_bytes}")
    if a.device == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda: no CUDA device is visible "
                       "(torch.cuda.is_available() is False)")
    for flag, path in (("--json", a.json_path), ("--csv", a.csv_path), ("--plot", a.plot_path)):
        _check_writable(flag, path)
    if a.plot_path and importlib.util.find_spec("matplotlib") is None:
        raise BadInput("--plot needs matplotlib, which is not installed: pip install matplotlib")
    cfg = Config(a.collectives, a.min_bytes, a.max_bytes, a.dtype, a.op, a.inplace, a.warmup,
                 a.iters, _resolve_reference(a.reference, a.device), a.device, a.nproc,
                 a.json_path, a.csv_path, a.plot_path)
    _check_memory(cfg, _local_world_size(cfg))
    return cfg


def _resolve_reference(name, device):
    if name == "auto":
        name = "nccl" if device == "cuda" else "gloo"
    if name == "nccl" and device != "cuda":
        raise BadInput("--reference nccl needs --device cuda (nccl has no CPU tensors)")
    available = {"gloo": dist.is_gloo_available, "nccl": dist.is_nccl_available}
    if name in available and not available[name]():
        raise BadInput(f"the reference backend {name} is not available in this torch build; "
                       "pass --reference none to measure ring alone")
    return name


def _check_writable(flag, path):
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise BadInput(f"{flag} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise BadInput(f"{flag} {path}: the folder {folder} is not writable")


def _check_memory(cfg, local_ranks):
    """Refuse sizes that cannot fit before spawning ranks that would be killed for memory."""
    need = local_ranks * BUFFERS_PER_RANK * cfg.max_bytes
    available = _available_host_memory()
    if available is not None and need > 0.8 * available:
        raise BadInput(
            f"--max-bytes {_human(cfg.max_bytes)} does not fit in memory: {local_ranks} ranks x "
            f"{BUFFERS_PER_RANK} buffers need about {need / GiB:.1f} GiB, "
            f"{available / GiB:.1f} GiB is available")
    if cfg.device == "cuda":
        devices = torch.cuda.device_count()
        ranks_per_device = math.ceil(local_ranks / devices)
        free = min(torch.cuda.mem_get_info(d)[0] for d in range(devices))
        if ranks_per_device * BUFFERS_PER_RANK * cfg.max_bytes > 0.8 * free:
            raise BadInput(f"--max-bytes {_human(cfg.max_bytes)} does not fit in GPU memory: "
                           f"{ranks_per_device} ranks per GPU, {free / GiB:.1f} GiB free")


def _available_host_memory():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * KiB
    except OSError:
        pass
    return None


def _under_torchrun():
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def _local_world_size(cfg):
    if _under_torchrun():
        return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    return cfg.nproc


# ---- inputs whose reduction is exact in any order ----------------------------------------------
#
# Rank r's input repeats a short tile of small integers. Every partial sum, product, max or min
# is a small integer, exact in every dtype here (float16/bfloat16 hold integers up to 256
# exactly), so the expected result is a closed form and any reduction order must match it
# bit for bit. AVG divides the exact sum once; see _count_wrong.

# op -> (tile length, the value rank r puts at position k of its tile)
_REDUCTION_TILES = {
    "sum": (4, lambda r, k: (r + k) % 4),
    "avg": (4, lambda r, k: (r + k) % 4),
    "product": (4, lambda r, k: 2 if (r + k) % 4 == 0 else 1),  # a small power of two
    "max": (5, lambda r, k: (3 * r + k) % 5),
    "min": (5, lambda r, k: (3 * r + k) % 5),
}
_COMBINE = {"sum": operator.add, "avg": operator.add, "product": operator.mul,
            "max": max, "min": min}


def contribution_tile(op, rank):
    length, value = _REDUCTION_TILES[op]
    return [value(rank, k) for k in range(length)]


def reduced_tile(op, world, floating):
    columns = zip(*(contribution_tile(op, r) for r in range(world)))
    combined = [functools.reduce(_COMBINE[op], column) for column in columns]
    if op == "avg":  # integer AVG truncates (the sums here are never negative)
        return [c / world if floating else c // world for c in combined]
    return combined


def movement_tile(seed):
    """What all_gather, broadcast and all_to_all move: a tile that differs per (sender, block)."""
    return [(3 * seed + k) % 11 for k in range(11)]


def fill_periodic(out, tile, start=0):
    """out[i] = tile[(start + i) % len(tile)], without a temporary the size of out."""
    period = len(tile)
    base = torch.tensor(tile, dtype=torch.float64).roll(-(start % period)).to(out.dtype)
    base = base.to(out.device)
    whole, rest = divmod(out.numel(), period)
    out[: whole * period].view(whole, period).copy_(base.expand(whole, period))
    out[whole * period:].copy_(base[:rest])
    return out


# ---- one collective at one size ----------------------------------------------------------------

@dataclass
class RankContext:
    rank: int
    world: int
    device: torch.device
    dtype: torch.dtype
    op_name: str
    inplace: bool

    @property
    def op(self):
        return OPS[self.op_name]

    def empty(self, count):
        return torch.empty(count, dtype=self.dtype, device=self.device)

    def periodic(self, tile, count, start=0):
        return fill_periodic(self.empty(count), tile, start)


@dataclass
class Case:
    """Buffers for one collective at one size, shared by ring and the reference."""
    call: object      # call(group): one collective call
    prepare: object   # prepare(): fresh inputs (and a cleared output) before the checked call
    output: torch.Tensor
    expected: torch.Tensor


def _all_reduce_case(ctx, count):
    buf = ctx.empty(count)
    tile = contribution_tile(ctx.op_name, ctx.rank)
    floating = ctx.dtype.is_floating_point
    expected = ctx.periodic(reduced_tile(ctx.op_name, ctx.world, floating), count)
    return Case(call=lambda group: dist.all_reduce(buf, op=ctx.op, group=group),
                prepare=lambda: fill_periodic(buf, tile), output=buf, expected=expected)


def _all_gather_case(ctx, count):
    block = count // ctx.world
    output = ctx.empty(count)
    inp = output.narrow(0, ctx.rank * block, block) if ctx.inplace else ctx.empty(block)
    expected = ctx.empty(count)
    for r in range(ctx.world):
        fill_periodic(expected.narrow(0, r * block, block), movement_tile(r))

    def prepare():
        output.zero_()
        fill_periodic(inp, movement_tile(ctx.rank))

    return Case(call=lambda group: ALL_GATHER_SINGLE(output, inp, group=group),
                prepare=prepare, output=output, expected=expected)


def _reduce_scatter_case(ctx, count):
    block = count // ctx.world
    inp = ctx.empty(count)
    output = inp.narrow(0, ctx.rank * block, block) if ctx.inplace else ctx.empty(block)
    floating = ctx.dtype.is_floating_point
    expected = ctx.periodic(reduced_tile(ctx.op_name, ctx.world, floating), block, ctx.rank * block)

    def prepare():
        output.zero_()
        fill_periodic(inp, contribution_tile(ctx.op_name, ctx.rank))

    return Case(call=lambda group: REDUCE_SCATTER_SINGLE(output, inp, op=ctx.op, group=group),
                prepare=prepare, output=output, expected=expected)


def _broadcast_case(ctx, count):
    root = 0
    buf = ctx.empty(count)

    def prepare():
        if ctx.rank == root:
            fill_periodic(buf, movement_tile(root))
        else:
            buf.zero_()

    return Case(call=lambda group: dist.broadcast(buf, src=root, group=group), prepare=prepare,
                output=buf, expected=ctx.periodic(movement_tile(root), count))


def _all_to_all_case(ctx, count):
    # Always out of place: no backend allows all_to_all_single's input to alias its output.
    block, n = count // ctx.world, ctx.world
    inp, output, expected = ctx.empty(count), ctx.empty(count), ctx.empty(count)
    for peer in range(n):  # block `peer` of the output is what `peer` sent to this rank
        fill_periodic(expected.narrow(0, peer * block, block), movement_tile(peer * n + ctx.rank))

    def prepare():
        output.zero_()
        for peer in range(n):
            fill_periodic(inp.narrow(0, peer * block, block), movement_tile(ctx.rank * n + peer))

    return Case(call=lambda group: dist.all_to_all_single(output, inp, group=group),
                prepare=prepare, output=output, expected=expected)


@dataclass(frozen=True)
class Collective:
    build: object          # build(ctx, count) -> Case
    busbw_factor: object   # world size -> busbw / algbw
    reduces: bool          # takes --op
    splits: bool           # count must be a multiple of the world size
    inplace: bool = None   # fixed by the torch API, or None: chosen by --inplace/--out-of-place
    why_fixed: str = ""    # for the table header


def _ring_factor(n):
    return (n - 1) / n


COLLECTIVES = {
    "all_reduce": Collective(_all_reduce_case, lambda n: 2 * (n - 1) / n, True, False,
                             True, "torch has no out-of-place all_reduce"),
    "all_gather": Collective(_all_gather_case, _ring_factor, False, True),
    "reduce_scatter": Collective(_reduce_scatter_case, _ring_factor, True, True),
    "broadcast": Collective(_broadcast_case, lambda n: 1.0, False, False,
                            True, "torch has no out-of-place broadcast; root 0"),
    "all_to_all": Collective(_all_to_all_case, _ring_factor, False, True,
                             False, "all_to_all_single's input cannot alias its output"),
}


def is_inplace(spec, cfg):
    return cfg.inplace if spec.inplace is None else spec.inplace


def _count_wrong(output, expected, op_name):
    if op_name == "avg" and expected.is_floating_point():
        # AVG divides the exact sum once; the backend may divide in a wider type and round
        # once more to the dtype, so allow one unit in the last place.
        eps = torch.finfo(expected.dtype).eps
        return int((~torch.isclose(output, expected, rtol=eps, atol=0)).sum())
    return int((output != expected).sum())


# ---- timing ------------------------------------------------------------------------------------

def _synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _barrier(group, device):
    """A tiny all_reduce on the measured group itself: every rank starts the timed calls
    together, on the same transport (and, on CUDA, the same stream) that is measured."""
    token = torch.zeros(1, device=device)
    dist.all_reduce(token, group=group)
    _synchronize(device)


def iterations_for(nbytes, iters, warmup):
    timed = min(iters, max(2, BYTES_PER_MEASUREMENT // nbytes))
    return timed, min(warmup, max(1, timed // 4))


@dataclass
class Measurement:
    seconds: float = None  # per call, slowest rank
    wrong: int = None      # summed over ranks
    error: str = None      # the backend refused this collective (e.g. an op it lacks)


def measure(case, group, ctx, timed, warmup, may_refuse):
    """Check one call against the expected result, warm up, then time `timed` calls."""
    case.prepare()
    try:
        case.call(group)
        _synchronize(ctx.device)
    except Exception as e:  # noqa: BLE001 - validation errors are raised on every rank alike
        if not may_refuse:
            raise
        return Measurement(error=str(e).strip().splitlines()[0])
    wrong = _count_wrong(case.output, case.expected, ctx.op_name)
    for _ in range(warmup):
        case.call(group)
    _barrier(group, ctx.device)
    start = time.perf_counter()
    for _ in range(timed):
        case.call(group)
    _synchronize(ctx.device)
    seconds = (time.perf_counter() - start) / timed
    return Measurement(seconds=_over_ranks(seconds, dist.ReduceOp.MAX),
                       wrong=int(_over_ranks(wrong, dist.ReduceOp.SUM)))


def _over_ranks(value, op):
    # Over the default (ring) group on CPU, outside the timed region.
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=op)
    return t.item()


def measure_copy_bandwidth(device, nbytes=ROOFLINE_BYTES, repeats=ROOFLINE_REPEATS):
    """Bytes per second one process copies from one large buffer to another, best of `repeats`
    (the memory traffic is at least twice that: read + write), as {"torch": copy_'s,
    "memcpy": the C library's (CPU only)}. Both count because they differ: on some machines
    copy_ is well below memcpy, whose non-temporal stores skip reading the destination, and
    a roofline that a backend's memcpy-based transport can exceed would be no roofline."""
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch: page faults are not bandwidth
    rates = {"torch": nbytes / _best_seconds(lambda: dst.copy_(src), device, repeats)}
    if device.type == "cpu":
        copy = functools.partial(ctypes.memmove, dst.data_ptr(), src.data_ptr(), nbytes)
        rates["memcpy"] = nbytes / _best_seconds(copy, device, repeats)
    return rates


def _best_seconds(fn, device, repeats):
    best = math.inf
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        fn()
        _synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


# ---- the sweep, on every rank ------------------------------------------------------------------

def sweep_sizes(cfg, collective, world):
    """(bytes, count) per size: doubling, the count rounded down to a multiple of the world size
    where the collective splits the array; sizes that round to nothing are left out."""
    elem = DTYPES[cfg.dtype].itemsize
    size = cfg.min_bytes
    while size <= cfg.max_bytes:
        count = size // elem
        if COLLECTIVES[collective].splits:
            count -= count % world
        if count > 0:
            yield count * elem, count
        size *= 2


def run_rank(cfg, copy_rates=None):
    """One rank of the benchmark (launched, or under torchrun). Rank 0 prints the table and
    returns (meta, rows); the other ranks return None."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = _rank_device(cfg.device, rank)
    dist.init_process_group("ring", timeout=GROUP_TIMEOUT)
    try:
        reference = None
        if cfg.reference != "none":
            reference = dist.new_group(backend=cfg.reference, timeout=GROUP_TIMEOUT)
        if copy_rates is None:  # under torchrun: rank 0 measures while the others wait
            copy_rates = measure_copy_bandwidth(device) if rank == 0 else {"torch": 0.0}
            dist.barrier()
        ctx = RankContext(rank, world, device, DTYPES[cfg.dtype], cfg.op, cfg.inplace)
        meta = _meta(cfg, world, copy_rates)
        table = Table(cfg, meta, enabled=rank == 0)
        rows = _sweep(cfg, ctx, reference, table)
        table.finish(rows)
        return (meta, rows) if rank == 0 else None
    finally:
        dist.destroy_process_group()


def _rank_device(kind, rank):
    if kind == "cpu":
        return torch.device("cpu")
    index = int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


# Ring's whole sweep runs first, then the reference's, rather than alternating size by size:
# another backend's threads running between two calls change where the scheduler puts the
# next backend's threads, and small-message times depend on that placement (on a 2-core
# machine ring's 4 KiB all_reduce takes either about 15 us or 70-200 us; right after gloo
# calls, mostly the latter). One phase per backend measures each as a program that uses only
# that backend would see it.

def _sweep(cfg, ctx, reference, table):
    plans = {name: [(nbytes, count, *iterations_for(nbytes, cfg.iters, cfg.warmup))
                    for nbytes, count in sweep_sizes(cfg, name, ctx.world)]
             for name in cfg.collectives}
    ring = {name: list(_measure_sweep(name, plans[name], None, "ring", ctx, table))
            for name in cfg.collectives}
    rows = []
    for name in cfg.collectives:
        table.begin(name, COLLECTIVES[name])
        refs = iter(())
        if reference is not None:  # measured lazily: each row prints as soon as it is complete
            refs = _measure_sweep(name, plans[name], reference, cfg.reference, ctx, table)
        for (nbytes, count, timed, warmup), ring_m in zip(plans[name], ring[name]):
            row = _row(name, cfg, ctx.world, nbytes, count, timed, warmup, ring_m,
                       next(refs, Measurement()), table.meta["copy_gbps"])
            table.add(row)
            rows.append(row)
    return rows


def _measure_sweep(name, plan, group, backend, ctx, table):
    """Yields a Measurement per size of `plan`, each measured when asked for. A backend that
    refuses the collective (the reference may lack an op or a dtype) ends its sweep early."""
    build = COLLECTIVES[name].build
    _settle(group, ctx.device)
    for i, (nbytes, count, timed, warmup) in enumerate(plan, 1):
        table.progress(f"{name} {_human(nbytes)} {backend} ({i}/{len(plan)})")
        case = build(ctx, count)
        m = measure(case, group, ctx, timed, warmup, may_refuse=group is not None)
        del case  # free this size's buffers before the next, larger one is allocated
        if m.error:
            table.note(f"{backend} refused {name}: {m.error}; its columns stay empty")
            return
        yield m


def _settle(group, device, calls=50):
    """Untimed tiny calls before a backend's first size, so that connection set-up (nccl's
    communicator) and the scheduler's first placement of its threads are not timed."""
    token = torch.zeros(1, device=device)
    for _ in range(calls):
        dist.all_reduce(token, group=group)
    _synchronize(device)


def _row(name, cfg, world, nbytes, count, timed, warmup, ring, ref, copy_gbps):
    spec = COLLECTIVES[name]
    factor = spec.busbw_factor(world)

    def bandwidths(m):
        if m.seconds is None:
            return None, None
        algbw = nbytes / m.seconds / 1e9
        return algbw, algbw * factor

    algbw, busbw = bandwidths(ring)
    ref_algbw, ref_busbw = bandwidths(ref)
    return {
        "collective": name, "bytes": nbytes, "count": count, "dtype": cfg.dtype,
        "op": cfg.op if spec.reduces else None,
        "inplace": is_inplace(spec, cfg),
        "world_size": world, "device": cfg.device, "iters": timed, "warmup": warmup,
        "time_us": ring.seconds * 1e6, "algbw_gbps": algbw, "busbw_gbps": busbw,
        "roofline_fraction": busbw / copy_gbps if copy_gbps else None, "wrong": ring.wrong,
        "reference": cfg.reference if cfg.reference != "none" else None,
        "ref_time_us": ref.seconds * 1e6 if ref.seconds is not None else None,
        "ref_algbw_gbps": ref_algbw, "ref_busbw_gbps": ref_busbw, "ref_wrong": ref.wrong,
        "ratio": ref.seconds / ring.seconds if ref.seconds is not None else None,
    }


def _meta(cfg, world, copy_rates):
    return {
        "world_size": world, "device": cfg.device, "dtype": cfg.dtype, "op": cfg.op,
        "inplace": cfg.inplace, "reference": cfg.reference if cfg.reference != "none" else None,
        "launched_by": "torchrun" if _launched_by_torchrun() else "torch-ring-bench",
        # the roofline: the faster of the two ways one process copies (see measure_copy_bandwidth)
        "copy_gbps": max(copy_rates.values()) / 1e9, "copy_bytes": ROOFLINE_BYTES,
        "copy_gbps_torch": copy_rates["torch"] / 1e9,
        "copy_gbps_memcpy": copy_rates["memcpy"] / 1e9 if "memcpy" in copy_rates else None,
        "torch": torch.__version__, "torch_ring_backend": torch_ring_backend.__version__,
        "host": platform.node(), "cpu": _cpu_model(), "cores": os.cpu_count(),
        "time": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def _launched_by_torchrun():
    return "TORCHELASTIC_RUN_ID" in os.environ


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# ---- the table ---------------------------------------------------------------------------------

def _human(nbytes):
    for unit, scale in (("G", GiB), ("M", MiB), ("K", KiB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B" if nbytes < KiB else f"{nbytes / MiB:.2f}M"


def _fmt(value, spec, width):
    return f"{'-' if value is None else format(value, spec):>{width}}"


class Table:
    """The nccl-tests-like table on stdout (rank 0 only), and a progress line on stderr that is
    rewritten in place on a terminal and otherwise printed every 10 s of a long sweep."""

    def __init__(self, cfg, meta, enabled):
        self.cfg, self.meta, self.enabled = cfg, meta, enabled
        self.ref = cfg.reference if cfg.reference != "none" else None
        self.tty = sys.stderr.isatty()
        self.started = self.last_progress = time.monotonic()
        self.progress_shown = False
        if enabled:
            self._print_preamble()

    def _print_preamble(self):
        m = self.meta
        vs = f" vs {self.ref}" if self.ref else ""
        self._out(f"# {PROG}: ring{vs}, world {m['world_size']}, device {m['device']}, "
                  f"torch {m['torch']}, torch_ring_backend {m['torch_ring_backend']}")
        ways = f"copy_ {m['copy_gbps_torch']:.2f}"
        if m["copy_gbps_memcpy"] is not None:
            ways += f", memcpy {m['copy_gbps_memcpy']:.2f}"
        self._out(f"# {m['cpu']}, {m['cores']} cores; "
                  f"memory-copy roofline {m['copy_gbps']:.2f} GB/s: "
                  f"one process copying {ROOFLINE_BYTES // MiB} MiB, best of {ROOFLINE_REPEATS} "
                  f"({ways} GB/s; the read+write traffic is twice that)")

    def begin(self, name, spec):
        if not self.enabled:
            return
        place = "in place" if is_inplace(spec, self.cfg) else "out of place"
        if spec.why_fixed:
            place += f" ({spec.why_fixed})"
        op = f", op {self.cfg.op}" if spec.reduces else ""
        self._out(f"#\n# {name}, {self.cfg.dtype}{op}, {place}")
        head = (f"#{'size':>11} {'count':>11} {'type':>8} {'redop':>7} {'time(us)':>10} "
                f"{'algbw(GB/s)':>11} {'busbw(GB/s)':>11} {'roof%':>6} {'#wrong':>6}")
        if self.ref:
            head += (f" | {self.ref + '(us)':>10} {self.ref + ' busbw':>11} {'#wrong':>6} "
                     f"{'ring/' + self.ref:>9}")
        self._out(head)

    def add(self, row):
        if not self.enabled:
            return
        roof = None if row["roofline_fraction"] is None else 100 * row["roofline_fraction"]
        line = (f"{row['bytes']:>12} {row['count']:>11} {row['dtype']:>8} {row['op'] or 'none':>7} "
                f"{_fmt(row['time_us'], '.1f', 10)} {_fmt(row['algbw_gbps'], '.3f', 11)} "
                f"{_fmt(row['busbw_gbps'], '.3f', 11)} {_fmt(roof, '.1f', 6)} {row['wrong']:>6}")
        if self.ref:
            ratio = None if row["ratio"] is None else f"{row['ratio']:.2f}x"
            line += (f" | {_fmt(row['ref_time_us'], '.1f', 10)} "
                     f"{_fmt(row['ref_busbw_gbps'], '.3f', 11)} "
                     f"{_fmt(row['ref_wrong'], 'd', 6)} {_fmt(ratio, 's', 9)}")
        self._out(line)

    def note(self, text):
        if self.enabled:
            self._out(f"# note: {text}")

    def finish(self, rows):
        if not self.enabled:
            return
        self._out("#")
        for name in self.cfg.collectives:
            mine = [r for r in rows if r["collective"] == name]
            summary = f"# {name}: avg busbw ring {_avg(mine, 'busbw_gbps'):.3f} GB/s"
            if self.ref and any(r["ref_busbw_gbps"] is not None for r in mine):
                summary += f", {self.ref} {_avg(mine, 'ref_busbw_gbps'):.3f} GB/s"
            wrong = sum(r["wrong"] for r in mine)
            summary += f"; #wrong {wrong} {'OK' if wrong == 0 else 'FAILED'}"
            self._out(summary)

    def progress(self, text):
        if not self.enabled:
            return
        now = time.monotonic()
        line = f"[{PROG}] {text}, {now - self.started:.0f} s"
        if self.tty:
            sys.stderr.write("\r" + line.ljust(72)[:100])
            sys.stderr.flush()
            self.progress_shown = True
        elif now - self.last_progress >= 10:
            print(line, file=sys.stderr, flush=True)
            self.last_progress = now

    def _out(self, line):
        if self.progress_shown:  # clear the progress line so the row starts on a clean line
            sys.stderr.write("\r" + " " * 100 + "\r")
            sys.stderr.flush()
            self.progress_shown = False
        print(line, flush=True)


def _avg(rows, key):
    values = [r[key] for r in rows if r[key] is not None]
    return sum(values) / len(values) if values else 0.0


# ---- files -------------------------------------------------------------------------------------

def write_outputs(cfg, meta, rows):
    if cfg.json_path:
        with open(cfg.json_path, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        print(f"[{PROG}] wrote {cfg.json_path}", file=sys.stderr)
    if cfg.csv_path:
        with open(cfg.csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["collective"])
            writer.writeheader()
            writer.writerows(rows)
        print(f"[{PROG}] wrote {cfg.csv_path}", file=sys.stderr)
    if cfg.plot_path:
        plot_busbw(cfg.plot_path, meta, rows)
        print(f"[{PROG}] wrote {cfg.plot_path}", file=sys.stderr)


def plot_busbw(path, meta, rows):
    """busbw against size: ring solid, the reference dashed, the memory-copy roofline dotted."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never open a window
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(9, 5.5))
    names = list(dict.fromkeys(r["collective"] for r in rows))
    for i, name in enumerate(names):
        mine = [r for r in rows if r["collective"] == name]
        _plot_line(ax, mine, "busbw_gbps", "-o", f"C{i}", f"{name} ring")
        if meta["reference"]:
            _plot_line(ax, mine, "ref_busbw_gbps", "--s", f"C{i}", f"{name} {meta['reference']}")
    ax.axhline(meta["copy_gbps"], color="gray", linestyle=":",
               label=f"memory copy, one process ({meta['copy_gbps']:.1f} GB/s)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _human(int(round(x)))))
    ax.set_xlabel("message size (bytes of the full array)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"busbw, world {meta['world_size']}, {meta['device']}, {meta['dtype']}"
                 f" ({meta['cpu'] if meta['device'] == 'cpu' else 'GPU'})", fontsize=10)
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.15)
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_line(ax, rows, key, style, color, label):
    points = [(r["bytes"], r[key]) for r in rows if r[key]]  # log scale: no zeros (world 1)
    if points:
        ax.plot(*zip(*points), style, color=color, label=label, markersize=4)


# ---- entry point -------------------------------------------------------------------------------

def main(argv=None):
    try:
        cfg = parse_config(argv)
    except BadInput as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    try:
        result = run_rank(cfg) if _under_torchrun() else _run_local_ranks(cfg)
    except RankFailed as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    if result is None:  # a torchrun rank other than 0
        return 0
    meta, rows = result
    try:
        write_outputs(cfg, meta, rows)
    except OSError as e:
        print(f"{PROG}: error: cannot write the results: {e}", file=sys.stderr)
        return 1
    wrong = sum(r["wrong"] for r in rows)
    if wrong:
        print(f"{PROG}: ring produced {wrong} wrong elements", file=sys.stderr)
        return 1
    return 0


def _run_local_ranks(cfg):
    # Measured here, before the ranks exist, so that nothing else competes for memory bandwidth.
    device = torch.device("cuda", 0) if cfg.device == "cuda" else torch.device("cpu")
    copy_rates = measure_copy_bandwidth(device)
    if cfg.device == "cuda":
        torch.cuda.empty_cache()
    return run_on_local_ranks(run_rank, cfg.nproc, cfg, copy_rates)[0]


if __name__ == "__main__":
    sys.exit(main())
