"""What each collective computes, and what it must produce. Every rank fills its inputs
with a short tile of small integers, so the result of any reduction order is exact and has a
closed form: the tiles (contribution_tile, reduced_tile, movement_tile), fill_periodic that
repeats one over a buffer, one Case builder per collective, COLLECTIVES with each one's busbw
factor, and _count_wrong that compares an output with its expected result. This file knows
nothing of the command line, of timing or of the table; every other file of the benchmark
builds on it."""
import functools
import operator
from dataclasses import dataclass

import torch
import torch.distributed as dist

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int32": torch.int32, "int64": torch.int64,
    "int8": torch.int8, "uint8": torch.uint8,
}
OPS = {
    "sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN, "product": dist.ReduceOp.PRODUCT,
}
# torch 2.14 renamed all_gather_into_tensor and reduce_scatter_tensor (the old names warn on
# every call); older torch has only the old names.
ALL_GATHER_SINGLE = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER_SINGLE = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


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
    # The input when it is not `output` itself (for references that call their own API on the
    # same buffers: mpi_reference.py); may be a view into `output` (in place).
    input: torch.Tensor = None


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
                prepare=prepare, output=output, expected=expected, input=inp)


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
                prepare=prepare, output=output, expected=expected, input=inp)


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
                prepare=prepare, output=output, expected=expected, input=inp)


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
