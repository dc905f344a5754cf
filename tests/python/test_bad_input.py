"""Inputs the ring backend refuses: each raises on the calling rank, before anything is queued,
with a message naming the backend, the collective and the problem; the group stays usable.

Every rank makes every bad call (each fails locally), so the ranks stay in step.
"""
import pytest
import torch
import torch.distributed as dist

from checks import Report, assert_reports_pass
from harness import WORLDS


def _cpu_backend():
    # Bypasses the Python wrappers, which turn a complex all_reduce into a float one.
    return dist.group.WORLD._get_backend(torch.device("cpu"))


def bad_inputs(ctx):
    report = Report()
    non_contiguous = torch.ones(4, 6).t()
    report.check_raises("all_reduce non-contiguous", lambda: dist.all_reduce(non_contiguous),
                        ["ring", "all_reduce", "not contiguous"])
    report.check_raises("broadcast non-contiguous",
                        lambda: dist.broadcast(torch.ones(4, 6)[:, ::2], src=0),
                        ["ring", "broadcast", "not contiguous"])
    report.check_raises("all_gather_into_tensor non-contiguous output",
                        lambda: dist.all_gather_into_tensor(
                            torch.empty(3, 2 * ctx.world).t(), torch.ones(3)),
                        ["ring", "all_gather_into_tensor", "not contiguous"])
    # all_reduce takes a sparse tensor (test_sparse_all_reduce.py); the other collectives not.
    report.check_raises("broadcast sparse",
                        lambda: _cpu_backend().broadcast([torch.ones(5).to_sparse()]),
                        ["ring", "broadcast", "sparse tensor", "dense"])
    report.check_raises("all_reduce BAND float32",
                        lambda: dist.all_reduce(torch.ones(5), op=dist.ReduceOp.BAND),
                        ["ring", "all_reduce", "BAND", "float32"])
    report.check_raises("all_reduce BXOR float16",
                        lambda: dist.all_reduce(torch.ones(5, dtype=torch.float16),
                                                op=dist.ReduceOp.BXOR),
                        ["ring", "all_reduce", "BXOR", "float16"])
    report.check_raises("all_reduce AVG bool",
                        lambda: dist.all_reduce(torch.ones(5, dtype=torch.bool),
                                                op=dist.ReduceOp.AVG),
                        ["ring", "all_reduce", "AVG", "bool"])
    report.check_raises("all_reduce PREMUL_SUM bool",
                        lambda: dist.all_reduce(torch.ones(5, dtype=torch.bool),
                                                op=dist._make_nccl_premul_sum(2.0)),
                        ["ring", "all_reduce", "PREMUL_SUM", "bool"])
    report.check_raises("reduce_scatter_tensor BAND float32",
                        lambda: dist.reduce_scatter_tensor(torch.empty(2),
                                                           torch.ones(2 * ctx.world),
                                                           op=dist.ReduceOp.BAND),
                        ["ring", "reduce_scatter_tensor", "BAND", "float32"])
    report.check_raises("reduce complex64",
                        lambda: dist.reduce(torch.ones(5, dtype=torch.complex64), dst=0),
                        ["ring", "reduce", "complex", "not supported"])
    report.check_raises("all_reduce complex64 (backend call)",
                        lambda: _cpu_backend().allreduce([torch.ones(5, dtype=torch.complex64)]),
                        ["ring", "all_reduce", "complex", "not supported"])
    # uint16/32/64 and float8_e4m3fn/e5m2 are served (test_wide_unsigned_float8.py); the
    # "fnuz" float8 formats (no negative zero, another bias) are not.
    report.check_raises("all_reduce float8_e5m2fnuz",
                        lambda: dist.all_reduce(torch.ones(5, dtype=torch.float8_e5m2fnuz)),
                        ["ring", "all_reduce", "Float8_e5m2fnuz", "not supported", "uint64"])
    if hasattr(dist, "gather_single"):  # torch 2.14's
        # Every rank its own root here, so that each one fails its own check and none waits.
        report.check_raises("gather_single output of the wrong size",
                            lambda: dist.gather_single(torch.ones(3),
                                                       torch.empty(3 * ctx.world + 1),
                                                       dst=ctx.rank),
                            ["ring: gather_single on rank", "gather_tensor has",
                             f"but {3 * ctx.world} are expected (world size {ctx.world} x "
                             "input's 3)"])
    # The group still works, on every rank.
    x = torch.full((1009,), float(ctx.rank + 1))
    dist.all_reduce(x)
    report.check("all_reduce afterwards", x, torch.full((1009,), ctx.world * (ctx.world + 1) / 2))
    return report


def complex_all_reduce(ctx):
    # The Python wrapper reduces a complex tensor as its real view: a supported float32 sum.
    report = Report()
    x = torch.full((7,), complex(ctx.rank, 1), dtype=torch.complex64)
    dist.all_reduce(x)
    want = torch.full((7,), complex(sum(range(ctx.world)), ctx.world), dtype=torch.complex64)
    report.check("complex64 SUM via view_as_real", x, want)
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_bad_inputs_raise_before_communication(pool, world):
    assert_reports_pass(pool.run(bad_inputs), f"bad inputs, world {world}")


@pytest.mark.parametrize("world", [2])
def test_complex_all_reduce_through_python_wrapper(pool, world):
    assert_reports_pass(pool.run(complex_all_reduce), f"complex all_reduce, world {world}")
