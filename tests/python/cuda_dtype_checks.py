"""The rank function of the GPU tests for the dtypes added after the first ten (test_cuda.py):
uint16/uint32/uint64 with C's unsigned wrap-around and torch's two 8-bit floats, all_reduce on
the CUDA ring kernels (or on the CPU path, device="cpu": run_on_cpu). The references are
computed here with Python integers (exact, wrapping modulo 2^bits by hand) and, for float8, from
values whose every partial result is exact, so that the order of the ring's additions cannot
matter and one rounding of the exact result is the answer."""
import functools
import operator
import random

import torch
import torch.distributed as dist

from cuda_reference import PERIOD, PathCounter, Report, _setup, _sync, digest, tile

UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)
UNSIGNED_OPS = ("SUM", "AVG", "PRODUCT", "MAX", "MIN", "BAND", "BOR", "BXOR")
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)
# AVG is left out for float8: its division rounds a second time, where the reference would
# need the kernel's own order of the two roundings.
FLOAT8_OPS = ("SUM", "PRODUCT", "MAX", "MIN")
COUNTS = (1, 4099, 65536 + 3)
# Why at most 4 ranks: the float8 products below are powers of two up to 2^4, and the sums of
# 0s and 1s at most the world size, all exact in both formats.
MAX_WORLD = 4


def _unsigned_period(rank, world, dtype, op):
    bits = dtype.itemsize * 8
    g = random.Random(f"{rank} {dtype} {op}")
    # AVG's sum must not wrap (its quotient is only defined on the true sum): values below
    # 2^bits / world; every other op takes the full range, top bit set included.
    top = (1 << bits) // world if op == "AVG" else 1 << bits
    return [g.randrange(top) for _ in range(PERIOD)]


def _unsigned_expected(periods, world, dtype, op):
    mask = (1 << (dtype.itemsize * 8)) - 1
    combine = {"SUM": operator.add, "AVG": operator.add, "PRODUCT": operator.mul,
               "MAX": max, "MIN": min, "BAND": operator.and_, "BOR": operator.or_,
               "BXOR": operator.xor}[op]
    out = []
    for values in zip(*periods):
        v = functools.reduce(combine, values) & mask
        out.append(v // world if op == "AVG" else v)
    return out


def _as_tensor(values, dtype):
    return torch.tensor(values, dtype=dtype)


def _float8_period(rank, dtype, op):
    g = random.Random(f"{rank} {dtype} {op}")
    if op == "SUM":
        choices = (0.0, 1.0)
    elif op == "PRODUCT":
        choices = (1.0, 2.0, -1.0)
    else:  # MAX, MIN: integers every format holds exactly; no negative zero to tie with +0
        choices = tuple(float(v) for v in range(-8, 9))
    return torch.tensor([g.choice(choices) for _ in range(PERIOD)], dtype=torch.float64)


def _float8_expected(periods, op):
    stacked = torch.stack(periods)
    return {"SUM": lambda: stacked.sum(0), "PRODUCT": lambda: stacked.prod(0),
            "MAX": lambda: stacked.amax(0), "MIN": lambda: stacked.amin(0)}[op]()


def rank_wide_unsigned_float8(device="cuda"):
    rank, world, dev = _setup(device=device)
    assert world <= MAX_WORLD, f"the float8 references are exact up to {MAX_WORLD} ranks"
    paths = PathCounter(dev)
    rep = Report()
    for dtype in UNSIGNED:
        for op in UNSIGNED_OPS:
            periods = [_unsigned_period(r, world, dtype, op) for r in range(world)]
            want = _as_tensor(_unsigned_expected(periods, world, dtype, op), dtype)
            mine = _as_tensor(periods[rank], dtype)
            for count in COUNTS:
                x = tile(mine, count, dev)
                dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
                rep.check(f"all_reduce {dtype} {op} count {count}", x, tile(want, count, dev))
                rep.digests[f"{dtype} {op} {count}"] = digest(x)
    for dtype in FLOAT8:
        for op in FLOAT8_OPS:
            periods = [_float8_period(r, dtype, op) for r in range(world)]
            want = _float8_expected(periods, op).to(dtype)
            mine = periods[rank].to(dtype)
            for count in COUNTS:
                x = tile(mine, count, dev)
                dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
                rep.check(f"all_reduce {dtype} {op} count {count}", x, tile(want, count, dev))
                rep.digests[f"{dtype} {op} {count}"] = digest(x)
    _sync(dev)
    counted = paths.done()
    dist.destroy_process_group()
    return {**rep.as_dict(), "paths": counted, "staged_expected": 0}
