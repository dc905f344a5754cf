"""all_reduce: every op x dtype x world size x edge size, against an independent reference
and against gloo in the same run, with bitwise-identical results on all ranks.

One case per (world, dtype) loops over ops and sizes inside the ranks; each sub-case is
labelled "op size kind" so a failure names exactly what went wrong.
"""
import pytest
import torch
import torch.distributed as dist

from checks import Report, assert_reports_pass
from harness import WORLDS
from reference import (
    ALL_DTYPES, BITWISE_OPS, FLOATS, dtype_from_name, dtype_name, exact_input,
    expected_reduction, float_tolerance, ops_for, premul_factor, random_float_input, reduce_op,
    special_float_input,
)

LARGEST = 2**24  # float32 elements (64 MiB); SUM only, to keep the suite fast


def edge_sizes(world):
    return sorted({0, 1, max(world - 1, 0), world + 1, 1009, 2**20})


def gloo_supports(op, dtype):
    """The (op, dtype) pairs gloo reduces, so it can serve as a second reference."""
    if op == "PREMUL_SUM" or dtype == torch.int16:
        return False
    if op == "AVG":
        return dtype in FLOATS  # gloo's integer AVG fails to cast its float result back
    if op in BITWISE_OPS:
        return dtype not in FLOATS
    return True


# ---- cases (run on every rank) -----------------------------------------------------------------


def all_reduce_matrix(ctx, dtype_str):
    dtype = dtype_from_name(dtype_str)
    report = Report()
    for op in ops_for(dtype):
        factor = premul_factor(dtype) if op == "PREMUL_SUM" else None
        for n in edge_sizes(ctx.world):
            inputs = [exact_input(r, n, dtype, op) for r in range(ctx.world)]
            got = inputs[ctx.rank].clone()
            dist.all_reduce(got, op=reduce_op(op, factor))
            label = f"{op} n={n} exact"
            report.check(label, got, expected_reduction(inputs, op, dtype, factor))
            if gloo_supports(op, dtype):
                ref = inputs[ctx.rank].clone()
                dist.all_reduce(ref, op=reduce_op(op), group=ctx.gloo)
                report.check(f"{label} vs gloo", got, ref)
        if dtype in FLOATS:
            _random_floats(ctx, report, dtype, op, factor)
    if dtype in FLOATS:
        _special_floats(ctx, report, dtype)
    if "PREMUL_SUM" in ops_for(dtype):
        _premul_tensor_factor(ctx, report, dtype)
    _shapes_and_views(ctx, report, dtype)
    return report


def _shapes_and_views(ctx, report, dtype):
    """A 0-dim tensor, multi-dimensional shapes, and a view in the middle of a larger buffer
    whose neighbouring elements must stay untouched."""
    for shape in ((), (3, 5), (2, 0, 3), (7, 1, 11)):
        n = torch.Size(shape).numel()
        inputs = [exact_input(r, n, dtype, "SUM", seed=2) for r in range(ctx.world)]
        got = inputs[ctx.rank].clone().view(shape)
        dist.all_reduce(got)
        want = expected_reduction(inputs, "SUM", dtype).view(shape)
        report.check(f"SUM shape {shape}", got, want)
    guard = 16
    for n in (1, ctx.world + 1, 1009):
        inputs = [exact_input(r, n, dtype, "MAX", seed=3) for r in range(ctx.world)]
        buffer = exact_input(ctx.rank, n + 2 * guard, dtype, "MAX", seed=4)
        before = buffer.clone()
        view = buffer[guard:guard + n]
        view.copy_(inputs[ctx.rank])
        dist.all_reduce(view, op=reduce_op("MAX"))
        report.check(f"MAX n={n} view at offset {guard}", view,
                     expected_reduction(inputs, "MAX", dtype))
        report.check(f"MAX n={n} elements around the view untouched",
                     torch.cat([buffer[:guard], buffer[guard + n:]]),
                     torch.cat([before[:guard], before[guard + n:]]), same_on_all_ranks=False)


def _random_floats(ctx, report, dtype, op, factor):
    for n in (ctx.world + 1, 1009, 2**16):
        inputs = [random_float_input(r, n, dtype, op) for r in range(ctx.world)]
        got = inputs[ctx.rank].clone()
        dist.all_reduce(got, op=reduce_op(op, factor))
        label = f"{op} n={n} random"
        if op in ("MAX", "MIN"):  # exact in any order
            report.check(label, got, expected_reduction(inputs, op, dtype))
            continue
        scaled = inputs
        if op == "PREMUL_SUM":
            scaled = [(x.double() * factor).to(dtype) for x in inputs]
        want = expected_reduction(inputs, op, dtype, factor)
        report.check_close(label, got, want, float_tolerance(scaled, op, dtype))


def _special_floats(ctx, report, dtype):
    for op in ("MAX", "MIN"):
        n = 1009
        inputs = [special_float_input(r, n, dtype) for r in range(ctx.world)]
        got = inputs[ctx.rank].clone()
        dist.all_reduce(got, op=reduce_op(op))
        report.check(f"{op} n={n} inf/nan", got, expected_reduction(inputs, op, dtype),
                     equal_nan=True)


def _premul_tensor_factor(ctx, report, dtype):
    # FSDP passes the factor as a one-element tensor rather than a float.
    factor = torch.tensor(premul_factor(dtype), dtype=torch.float64)
    n = 1009
    inputs = [exact_input(r, n, dtype, "PREMUL_SUM", seed=1) for r in range(ctx.world)]
    got = inputs[ctx.rank].clone()
    dist.all_reduce(got, op=reduce_op("PREMUL_SUM", factor))
    report.check(f"PREMUL_SUM n={n} tensor factor", got,
                 expected_reduction(inputs, "PREMUL_SUM", dtype, factor))
    if dtype in FLOATS:
        return
    # Integers with a fractional factor: each contribution is scaled in double and truncated
    # toward zero before the sum (README: "factor applied in double, truncated").
    for fractional in (1.7, -0.6):
        got = inputs[ctx.rank].clone()
        dist.all_reduce(got, op=reduce_op("PREMUL_SUM", fractional))
        want = sum(torch.trunc(x.double() * fractional) for x in inputs).to(dtype)
        report.check(f"PREMUL_SUM n={n} factor {fractional} truncates", got, want)


def all_reduce_largest(ctx):
    report = Report()
    inputs_sum = torch.zeros(LARGEST)
    for r in range(ctx.world):
        inputs_sum += exact_input(r, LARGEST, torch.float32, "SUM")  # exact: small integers
    mine = exact_input(ctx.rank, LARGEST, torch.float32, "SUM")
    got = mine.clone()
    dist.all_reduce(got)
    report.check(f"SUM n={LARGEST} exact", got, inputs_sum)
    dist.all_reduce(mine, group=ctx.gloo)
    report.check(f"SUM n={LARGEST} vs gloo", got, mine)
    return report


# ---- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype_str", [dtype_name(d) for d in ALL_DTYPES])
@pytest.mark.parametrize("world", WORLDS)
def test_all_reduce_every_op_and_size(pool, world, dtype_str):
    reports = pool.run(all_reduce_matrix, dtype_str)
    assert_reports_pass(reports, f"all_reduce {dtype_str} world {world}")


@pytest.mark.parametrize("world", WORLDS)
def test_all_reduce_largest_float32_sum(pool, world):
    reports = pool.run(all_reduce_largest)
    assert_reports_pass(reports, f"all_reduce float32 x {LARGEST} world {world}")
