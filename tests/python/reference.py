"""Inputs that every rank can rebuild for every other rank, and expected results computed from
them with plain torch ops: the independent reference for the ring backend's reductions.

Inputs are a pure function of (rank, size, dtype, op, seed), so each rank computes the whole
group's inputs locally instead of asking any backend for them.
"""
import functools
import hashlib

import torch
import torch.distributed as dist

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
ALL_DTYPES = FLOATS + INTEGERS + (torch.bool,)

ARITHMETIC_OPS = ("SUM", "AVG", "MAX", "MIN", "PRODUCT", "PREMUL_SUM")
BITWISE_OPS = ("BAND", "BOR", "BXOR")
BOOL_OPS = ("SUM", "MAX", "MIN", "PRODUCT") + BITWISE_OPS

# PREMUL_SUM factors whose products with the small-integer inputs are exact in every dtype:
# a power of two for floating types; an integer for integer types, where the meaning of a
# fractional factor differs between implementations (NCCL converts the factor to the dtype).
FLOAT_PREMUL_FACTOR = 0.5
INTEGER_PREMUL_FACTOR = 3.0


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def dtype_from_name(name):
    return getattr(torch, name)


def ops_for(dtype):
    if dtype == torch.bool:
        return BOOL_OPS
    if dtype in FLOATS:
        return ARITHMETIC_OPS
    return ARITHMETIC_OPS + BITWISE_OPS


def premul_factor(dtype):
    return FLOAT_PREMUL_FACTOR if dtype in FLOATS else INTEGER_PREMUL_FACTOR


def reduce_op(name, factor=None):
    """The torch ReduceOp for a name; PREMUL_SUM carries `factor` (a float or a 1-element tensor)."""
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(factor)
    return getattr(dist.ReduceOp, name)


def _generator(*key):
    # A stable seed from the key (Python's hash() of str is salted per process).
    digest = hashlib.sha256(repr(key).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))


def exact_input(rank, n, dtype, op, seed=0):
    """Values for which every reduction order gives the same, representable result: small
    integers (sums and products stay below 127 for up to 4 ranks; the sums are varied enough
    that AVG's division rounds), or random bits for the bitwise ops and bool."""
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=_generator("bool", rank, n, op, seed)).bool()
    if op in BITWISE_OPS:
        info = torch.iinfo(dtype)
        return torch.randint(info.min, info.max, (n,), generator=_generator(rank, n, dtype, seed),
                             dtype=dtype)
    signed = dtype != torch.uint8
    # Periodic in the index: build one period and tile it (large sizes are built often).
    period = 3 if op == "PRODUCT" else 11 if op in ("MAX", "MIN") else 7
    i = torch.arange(period, dtype=torch.int64)
    if op == "PRODUCT":
        values = torch.tensor([-1, 1, 2] if signed else [1, 2, 1])
        v = values[(i + rank + seed) % 3]
    elif op in ("MAX", "MIN"):
        v = (i * 5 + rank * 3 + seed) % 11 - (5 if signed else 0)
    else:  # SUM, AVG, PREMUL_SUM
        # Integers in [-11, 11]: sums stay exact and below 127 for up to 4 ranks, yet cover
        # values such as 5, 7, 10, 13 whose AVG rounds (x / 3 and x * (1 / 3) differ there).
        period = 23
        i = torch.arange(period, dtype=torch.int64)
        v = (i * 5 + rank * 11 + seed * 3) % 23 - (11 if signed else 0)
    return v.to(dtype).repeat(n // period + 1)[:n].clone()


def random_float_input(rank, n, dtype, op, seed=0):
    """Random floats (not exact under reordering); PRODUCT gets values near 1 to stay finite."""
    g = _generator("float", rank, n, dtype, op, seed)
    if op == "PRODUCT":
        v = torch.rand(n, generator=g, dtype=torch.float64) + 0.5
    else:
        v = torch.randn(n, generator=g, dtype=torch.float64)
    return v.to(dtype)


def payload(rank, n, dtype, seed=0, shape_tail=()):
    """Random data that differs by rank and seed, for collectives that only move data (any
    misplaced block shows). `shape_tail` adds trailing dimensions."""
    g = _generator("payload", rank, n, dtype, seed, shape_tail)
    shape = (n,) + tuple(shape_tail)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype in FLOATS:
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, generator=g, dtype=dtype)


def special_float_input(rank, n, dtype):
    """MAX/MIN inputs with inf, -inf and NaN at positions that differ by rank."""
    v = exact_input(rank, n, dtype, "MAX")
    i = torch.arange(n)
    v[(i + rank) % 7 == 0] = float("inf")
    v[(i + 2 * rank) % 5 == 1] = float("-inf")
    v[(i * 3 + rank) % 13 == 2] = float("nan")
    return v


def expected_reduction(inputs, op, dtype, factor=None):
    """The reduction of `inputs` (one tensor per rank, rank order) computed in a wide type and
    rounded once to `dtype`; integer AVG truncates toward zero, as integer division in C does."""
    world = len(inputs)
    if dtype == torch.bool:
        stacked = torch.stack(inputs)
        if op in ("SUM", "MAX", "BOR"):
            return stacked.any(0)
        if op in ("MIN", "PRODUCT", "BAND"):
            return stacked.all(0)
        if op == "BXOR":
            return stacked.to(torch.int64).sum(0) % 2 == 1
        raise ValueError(f"no bool reference for {op}")
    if op in BITWISE_OPS:
        fn = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
        return functools.reduce(fn, inputs)
    if op in ("MAX", "MIN"):
        stacked = torch.stack(inputs)
        return stacked.amax(0) if op == "MAX" else stacked.amin(0)
    wide = torch.float64 if dtype in FLOATS else torch.int64
    stacked = torch.stack(inputs).to(wide)
    if op == "PREMUL_SUM":
        f = float(factor) if not torch.is_tensor(factor) else factor.item()
        # Each rank's contribution is scaled and stored in its dtype before the sum.
        stacked = (stacked.to(torch.float64) * f).to(dtype).to(wide)
        return stacked.sum(0).to(dtype)
    if op == "SUM":
        return stacked.sum(0).to(dtype)
    if op == "PRODUCT":
        return stacked.prod(0).to(dtype)
    if op == "AVG":
        total = stacked.sum(0)
        if dtype in FLOATS:
            return (total / world).to(dtype)
        return torch.div(total, world, rounding_mode="trunc").to(dtype)
    raise ValueError(f"unknown op {op}")


def float_tolerance(inputs, op, dtype):
    """Elementwise error bound for a float reduction of `inputs` done in `dtype` in any order:
    (world + 1) roundings of the largest partial result."""
    world = len(inputs)
    eps = torch.finfo(dtype).eps
    stacked = torch.stack(inputs).to(torch.float64)
    if op == "PRODUCT":
        magnitude = stacked.abs().prod(0)
    elif op == "AVG":
        magnitude = stacked.abs().sum(0) / world
    else:
        magnitude = stacked.abs().sum(0)
    return (world + 1) * eps * magnitude + torch.finfo(dtype).tiny


def digest(t):
    """A hash of the tensor's bytes, for checking bitwise equality across ranks cheaply."""
    flat = t.detach().contiguous().view(-1)
    return hashlib.sha1(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


def describe_mismatch(got, want, equal_nan=False):
    """None if got and want are bitwise-equal values (NaN matches NaN when equal_nan);
    otherwise a short description of the first difference."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}"
    if got.numel() == 0:
        return None
    same = got == want
    if got.is_floating_point():
        # 0.0 and -0.0 compare equal but are different results.
        same &= torch.signbit(got) == torch.signbit(want)
        if equal_nan:
            same |= torch.isnan(got) & torch.isnan(want)
    if bool(same.all()):
        return None
    bad = (~same).nonzero()[0].tolist()
    index = tuple(bad)
    count = int((~same).sum())
    return (f"{count} of {got.numel()} elements differ; first at {index}: "
            f"got {got[index].item()!r}, want {want[index].item()!r}")
