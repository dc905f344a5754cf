"""uint16/uint32/uint64 and float8 (e4m3fn, e5m2) through every reducing plan, against references
computed without the ring: numpy's unsigned arithmetic (modulo 2^bits) and torch's own float8
casts. gloo refuses these dtypes ("Invalid scalar type"), so it cannot serve as the reference.

Float8 is reduced in float and rounded to the format after each combine, as torch casts a float
(README): a two-rank SUM is `(a.float() + b.float()).to(dtype)`, checked on all 65,536 pairs of
patterns. Each case records the plan every call took and asserts that both the mailbox round and
the ring were exercised, and every result is compared bitwise across ranks.
"""
import numpy as np
import pytest
import torch
import torch.distributed as dist

from checks import Report, assert_reports_pass

UNSIGNED = {"uint16": (torch.uint16, np.uint16, torch.int16),
            "uint32": (torch.uint32, np.uint32, torch.int32),
            "uint64": (torch.uint64, np.uint64, torch.int64)}
FLOAT8 = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
OPS = {"SUM": dist.ReduceOp.SUM, "AVG": dist.ReduceOp.AVG, "PRODUCT": dist.ReduceOp.PRODUCT,
       "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX, "BAND": dist.ReduceOp.BAND,
       "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR}


def _last_plan():
    import torch_ring_backend

    return torch_ring_backend.flight_recorder()[-1]["plan"]


def _bits(report, label, got):
    """Records the raw bytes of `got` for the cross-rank comparison."""
    from reference import digest

    report.digests[f"{label} bits"] = digest(got)


# ---- unsigned ------------------------------------------------------------------------------------


def _unsigned_input(np_type, rank, n, seed):
    rng = np.random.default_rng(1000 * seed + rank)
    info = np.iinfo(np_type)
    return rng.integers(0, int(info.max), size=n, dtype=np_type, endpoint=True)


def _numpy_reduction(stack, op, np_type, world):
    if op in ("SUM", "AVG"):
        total = np.sum(stack, axis=0, dtype=np_type)  # wraps modulo 2^bits
        return total if op == "SUM" else total // np_type(world)
    if op == "PRODUCT":
        return np.prod(stack, axis=0, dtype=np_type)
    reducer = {"MIN": np.minimum, "MAX": np.maximum, "BAND": np.bitwise_and,
               "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}[op]
    return reducer.reduce(stack, axis=0)


def unsigned_case(ctx, name):
    dtype, np_type, same_width = UNSIGNED[name]
    report, plans = Report(), set()
    # A few elements (one mailbox round), and more than 64 KiB (the ring) for every width.
    for n in (3, 1009, 70_000):
        for seed, op in enumerate(OPS):
            inputs = [_unsigned_input(np_type, r, n, seed) for r in range(ctx.world)]
            want = _numpy_reduction(np.stack(inputs), op, np_type, ctx.world)
            got = torch.from_numpy(inputs[ctx.rank].copy())
            dist.all_reduce(got, op=OPS[op])
            plans.add(_last_plan())
            report.check(f"all_reduce {op} n={n}", got.view(same_width),
                         torch.from_numpy(want).view(same_width))
    # The other reducing collectives and a moving one take the dtype too.
    n = 1009 * ctx.world
    inputs = [_unsigned_input(np_type, r, n, 99) for r in range(ctx.world)]
    total = np.sum(np.stack(inputs), axis=0, dtype=np_type)
    out = torch.empty(1009, dtype=dtype)
    dist.reduce_scatter_tensor(out, torch.from_numpy(inputs[ctx.rank].copy()))
    want = torch.from_numpy(total[1009 * ctx.rank:1009 * (ctx.rank + 1)].copy())
    report.check("reduce_scatter_tensor SUM", out.view(same_width), want.view(same_width),
                 same_on_all_ranks=False)
    gathered = torch.empty(n * ctx.world, dtype=dtype)
    dist.all_gather_into_tensor(gathered, torch.from_numpy(inputs[ctx.rank].copy()))
    report.check("all_gather_into_tensor", gathered.view(same_width),
                 torch.from_numpy(np.concatenate(inputs)).view(same_width))
    report.check_raises(
        "PREMUL_SUM refused",
        lambda: dist.all_reduce(torch.ones(4, dtype=dtype),
                                op=dist._make_nccl_premul_sum(0.5)),
        ["all_reduce", f"rank {ctx.rank}", "PREMUL_SUM", name, "negative"])
    return report, sorted(plans)


@pytest.mark.parametrize("name", sorted(UNSIGNED))
@pytest.mark.parametrize("world", [2, 3, 4])
def test_wide_unsigned_reductions_wrap_as_numpy_on_every_plan(pool, world, name):
    results = pool.run(unsigned_case, name)
    assert_reports_pass([r for r, _ in results], f"{name} world {world}")
    for rank, (_, plans) in enumerate(results):
        assert "ring" in plans and any("mailbox" in p for p in plans), (rank, plans)


# ---- float8 --------------------------------------------------------------------------------------


def _cast(values, dtype):
    """torch's cast of float values to `dtype`; e4m3fn saturated first, which torch 2.13 and
    later do themselves (torch 2.11 made such values NaN)."""
    if dtype == torch.float8_e4m3fn:
        values = torch.where(values.isnan(), values, values.clamp(-448.0, 448.0))
    return values.to(dtype)


def _as_values(t):
    """float values with -0 as +0 (MIN/MAX of two zeros may keep either), NaN as NaN."""
    return t.float() + 0.0


def _check_float8(report, label, got, want, zeros_equal=False):
    _bits(report, label, got)
    if zeros_equal:
        report.check(label, _as_values(got), _as_values(want), equal_nan=True)
    else:
        report.check(label, got.float(), want.float(), equal_nan=True)


def float8_every_pair(ctx, name):
    """World 2: rank 0 holds every pattern 256 times over, rank 1 each pattern against all."""
    dtype = FLOAT8[name]
    report, plans = Report(), set()
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    a = codes.repeat_interleave(256).view(dtype)
    b = codes.repeat(256).view(dtype)
    fa, fb = a.float(), b.float()
    wants = {
        "SUM": _cast(fa + fb, dtype),
        "PRODUCT": _cast(fa * fb, dtype),
        "MAX": torch.maximum(fa, fb).to(dtype),
        "MIN": torch.minimum(fa, fb).to(dtype),
        "AVG": _cast(_cast(fa + fb, dtype).float() / 2, dtype),
    }
    mine = a if ctx.rank == 0 else b
    for repeat in (1, 3):  # 64 KiB: the mailbox round; 192 KiB: the ring
        for op, want in wants.items():
            got = mine.repeat(repeat).clone()
            dist.all_reduce(got, op=OPS[op])
            plans.add(_last_plan())
            _check_float8(report, f"{op} x{repeat}", got, want.repeat(repeat),
                          zeros_equal=op in ("MAX", "MIN"))
    got = mine.clone()
    dist.all_reduce(got, op=dist._make_nccl_premul_sum(0.5))
    want = _cast(_cast(fa * 0.5, dtype).float() + _cast(fb * 0.5, dtype).float(), dtype)
    _check_float8(report, "PREMUL_SUM 0.5", got, want)
    return report, sorted(plans)


def float8_exact_sums(ctx, name):
    """Any world: small integers whose partial sums are exact in both formats (|sum| <= 8), so
    every plan's order of additions gives torch's cast of the exact sum; MAX/MIN of any finite
    patterns, which no order changes."""
    dtype = FLOAT8[name]
    report, plans = Report(), set()
    for n in (1009, 200_000):
        gen = [torch.Generator().manual_seed(7 * r + n) for r in range(ctx.world)]
        ints = [torch.randint(-2, 3, (n,), generator=g).float() for g in gen]
        got = ints[ctx.rank].to(dtype)
        dist.all_reduce(got)
        plans.add(_last_plan())
        _check_float8(report, f"SUM n={n}", got, _cast(sum(ints), dtype))
        patterns = [torch.randint(0, 256, (n,), generator=g, dtype=torch.int32) for g in gen]
        finite = [p.to(torch.uint8).view(dtype) for p in patterns]
        finite = [torch.where(x.float().isfinite(), x.float(), 0.0).to(dtype) for x in finite]
        for op, reduce in (("MAX", torch.maximum), ("MIN", torch.minimum)):
            want = finite[0].float()
            for x in finite[1:]:
                want = reduce(want, x.float())
            got = finite[ctx.rank].clone()
            dist.all_reduce(got, op=OPS[op])
            _check_float8(report, f"{op} n={n}", got, want.to(dtype), zeros_equal=True)
    report.check_raises("BXOR refused",
                        lambda: dist.all_reduce(torch.zeros(4, dtype=dtype), op=OPS["BXOR"]),
                        ["all_reduce", f"rank {ctx.rank}", "BXOR", name])
    return report, sorted(plans)


@pytest.mark.parametrize("name", sorted(FLOAT8))
@pytest.mark.parametrize("world", [2])
def test_float8_every_pair_of_patterns_is_torchs_cast_of_the_float_result(pool, world, name):
    results = pool.run(float8_every_pair, name)
    assert_reports_pass([r for r, _ in results], f"{name} every pair")
    for rank, (_, plans) in enumerate(results):
        assert "ring" in plans and any("mailbox" in p for p in plans), (rank, plans)


@pytest.mark.parametrize("name", sorted(FLOAT8))
@pytest.mark.parametrize("world", [3, 4])
def test_float8_exact_sums_and_extremes_on_every_plan(pool, world, name):
    results = pool.run(float8_exact_sums, name)
    assert_reports_pass([r for r, _ in results], f"{name} world {world}")
    for rank, (_, plans) in enumerate(results):
        assert "ring" in plans and any("mailbox" in p for p in plans), (rank, plans)
