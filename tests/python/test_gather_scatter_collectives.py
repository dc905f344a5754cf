"""all_gather and reduce_scatter in every form torch offers (list, single tensor concatenated or
stacked, FSDP2's in-place view, coalesced), plus all_reduce_coalesced."""
import pytest
import torch
import torch.distributed as dist

import torch_ring_backend
from checks import Report, assert_reports_pass
from harness import WORLDS
from reference import (
    dtype_name, exact_input, expected_reduction, payload, premul_factor, reduce_op,
)
from test_collectives import MOVE_DTYPES, move_sizes


def _last_collective():
    return torch_ring_backend.flight_recorder()[-1]["collective"]


# ---- all_gather --------------------------------------------------------------------------------


def all_gather_forms(ctx):
    report = Report()
    w, me = ctx.world, ctx.rank
    for dtype in MOVE_DTYPES:
        for n in move_sizes(w):
            label = f"{dtype_name(dtype)} n={n}"
            mine = payload(me, n, dtype)
            want = [payload(r, n, dtype) for r in range(w)]
            outs = [torch.empty(n, dtype=dtype) for _ in range(w)]
            dist.all_gather(outs, mine)
            for r in range(w):
                report.check(f"{label} all_gather [{r}]", outs[r], want[r])
            # The output sits between guard elements that must stay untouched.
            guarded = payload(me, w * n + 16, dtype, seed=1)
            before = guarded.clone()
            flat = guarded[8:8 + w * n]
            dist.all_gather_into_tensor(flat, mine)
            report.check(f"{label} into_tensor concatenated", flat, torch.cat(want))
            report.check(f"{label} into_tensor elements around the output untouched",
                         torch.cat([guarded[:8], guarded[8 + w * n:]]),
                         torch.cat([before[:8], before[8 + w * n:]]), same_on_all_ranks=False)
            stacked = torch.empty(w, n, dtype=dtype)
            dist.all_gather_into_tensor(stacked, mine)
            report.check(f"{label} into_tensor stacked", stacked, torch.stack(want))
            # FSDP2: the input is this rank's block of the output itself.
            shared = torch.zeros(w * n, dtype=dtype)
            block = shared.narrow(0, me * n, n)
            block.copy_(mine)
            dist.all_gather_into_tensor(shared, block)
            report.check(f"{label} into_tensor input is a view of the output", shared,
                         torch.cat(want))
    # torch 2.14's name for it (all_gather_into_tensor is deprecated there).
    if hasattr(dist, "all_gather_single"):
        mine = payload(me, 1009, torch.float32, seed=2)
        out = torch.empty(w * 1009)
        dist.all_gather_single(out, mine)
        report.check("float32 all_gather_single", out,
                     torch.cat([payload(r, 1009, torch.float32, seed=2) for r in range(w)]))
    rows = payload(me, 7, torch.float32, shape_tail=(3,))
    out, ref = torch.empty(7 * w, 3), torch.empty(7 * w, 3)
    dist.all_gather_into_tensor(out, rows)
    dist.all_gather_into_tensor(ref, rows, group=ctx.gloo)
    report.check("float32 [7, 3] into_tensor vs gloo", out, ref)
    return report


def coalesced_forms(ctx):
    """The coalesced entry points, reached through torch's _coalescing_manager."""
    report = Report()
    w, me = ctx.world, ctx.rank
    specs = [(0, torch.float32), (1, torch.uint8), (w + 1, torch.bfloat16), (1009, torch.int64),
             (2**17, torch.float32)]
    for async_ops in (False, True):
        outs = [torch.empty(w * n, dtype=dtype) for n, dtype in specs]
        with dist._coalescing_manager(async_ops=async_ops) as cm:
            for i, ((n, dtype), out) in enumerate(zip(specs, outs)):
                dist.all_gather_into_tensor(out, payload(me, n, dtype, seed=i))
        if async_ops:
            cm.wait()
        report.check(f"async={async_ops} reached all_gather_into_tensor_coalesced",
                     torch.tensor(_last_collective() == "all_gather_into_tensor_coalesced"),
                     torch.tensor(True))
        for i, ((n, dtype), out) in enumerate(zip(specs, outs)):
            want = torch.cat([payload(r, n, dtype, seed=i) for r in range(w)])
            report.check(f"async={async_ops} all_gather coalesced #{i} {dtype_name(dtype)} n={n}",
                         out, want)
    for op in ("SUM", "AVG", "MAX"):
        rs_specs = [(0, torch.float32), (1, torch.float32), (w + 1, torch.float32), (999, torch.int32)]
        if op == "AVG":
            rs_specs = rs_specs[:3]
        inputs = {i: [exact_input(r, w * n, dtype, op, seed=i) for r in range(w)]
                  for i, (n, dtype) in enumerate(rs_specs)}
        outs = [torch.empty(n, dtype=dtype) for n, dtype in rs_specs]
        with dist._coalescing_manager():
            for i, out in enumerate(outs):
                dist.reduce_scatter_tensor(out, inputs[i][me].clone(), op=reduce_op(op))
        report.check(f"{op} reached reduce_scatter_tensor_coalesced",
                     torch.tensor(_last_collective() == "reduce_scatter_tensor_coalesced"),
                     torch.tensor(True))
        for i, ((n, dtype), out) in enumerate(zip(rs_specs, outs)):
            full = expected_reduction(inputs[i], op, dtype)
            report.check(f"reduce_scatter coalesced {op} #{i} n={n}", out,
                         full[me * n:(me + 1) * n], same_on_all_ranks=False)
    # all_reduce_coalesced: one call over tensors of different shapes (and an empty one).
    shapes = [(3, 4), (0,), (1,), (w + 1,), (1009,)]
    for op in ("SUM", "MAX", "PRODUCT"):
        inputs = [[exact_input(r, torch.Size(s).numel(), torch.float64, op, seed=i).view(s)
                   for i, s in enumerate(shapes)] for r in range(w)]
        mine = [t.clone() for t in inputs[me]]
        dist.all_reduce_coalesced(mine, op=reduce_op(op))
        via_manager = [t.clone() for t in inputs[me]]
        with dist._coalescing_manager():
            for t in via_manager:
                dist.all_reduce(t, op=reduce_op(op))
        for i in range(len(shapes)):
            want = expected_reduction([inputs[r][i].reshape(-1) for r in range(w)], op,
                                      torch.float64).view(shapes[i])
            report.check(f"all_reduce_coalesced {op} #{i} {shapes[i]}", mine[i], want)
            report.check(f"coalescing_manager all_reduce {op} #{i} {shapes[i]}", via_manager[i],
                         want)
    return report


# ---- reduce_scatter ----------------------------------------------------------------------------

REDUCE_SCATTER_OPS = {
    torch.float32: ("SUM", "AVG", "PREMUL_SUM", "MAX"),
    torch.bfloat16: ("SUM", "AVG", "PREMUL_SUM"),  # FSDP2's gradient reductions
    torch.float16: ("SUM",),
    torch.int32: ("SUM", "AVG", "PREMUL_SUM", "MIN", "BXOR"),
}


def reduce_scatter_forms(ctx):
    report = Report()
    w, me = ctx.world, ctx.rank
    for dtype, ops in REDUCE_SCATTER_OPS.items():
        for op in ops:
            factor = premul_factor(dtype) if op == "PREMUL_SUM" else None
            for n in (0, 1, w + 1, 1009, 2**17):
                label = f"{dtype_name(dtype)} {op} n={n}"
                inputs = [exact_input(r, w * n, dtype, op) for r in range(w)]
                want = expected_reduction(inputs, op, dtype, factor)[me * n:(me + 1) * n]
                given = inputs[me].clone()
                out = torch.empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(out, given, op=reduce_op(op, factor))
                report.check(f"{label} tensor", out, want, same_on_all_ranks=False)
                report.check(f"{label} input untouched", given, inputs[me],
                             same_on_all_ranks=False)
                out = torch.empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(out, inputs[me].clone().view(w, n),
                                           op=reduce_op(op, factor))
                report.check(f"{label} tensor stacked input", out, want, same_on_all_ranks=False)
                out = torch.empty(n, dtype=dtype)
                parts = [inputs[me][j * n:(j + 1) * n].clone() for j in range(w)]
                dist.reduce_scatter(out, parts, op=reduce_op(op, factor))
                report.check(f"{label} list", out, want, same_on_all_ranks=False)
    # PREMUL_SUM with a tensor factor, as FSDP2 passes it.
    n = 1009
    factor = torch.tensor(0.25, dtype=torch.float64)
    inputs = [exact_input(r, w * n, torch.float32, "PREMUL_SUM", seed=3) for r in range(w)]
    out = torch.empty(n)
    dist.reduce_scatter_tensor(out, inputs[me].clone(), op=reduce_op("PREMUL_SUM", factor))
    report.check("float32 PREMUL_SUM tensor factor", out,
                 expected_reduction(inputs, "PREMUL_SUM", torch.float32, factor)[me * n:(me + 1) * n],
                 same_on_all_ranks=False)
    # torch 2.14's name for reduce_scatter_tensor.
    if hasattr(dist, "reduce_scatter_single"):
        inputs = [exact_input(r, w * n, torch.float32, "MAX", seed=5) for r in range(w)]
        out = torch.empty(n)
        dist.reduce_scatter_single(out, inputs[me].clone(), op=dist.ReduceOp.MAX)
        report.check("float32 MAX reduce_scatter_single", out,
                     expected_reduction(inputs, "MAX", torch.float32)[me * n:(me + 1) * n],
                     same_on_all_ranks=False)
    # The output is this rank's block of the input itself.
    inputs = [exact_input(r, w * n, torch.float32, "SUM", seed=4) for r in range(w)]
    buffer = inputs[me].clone()
    out = buffer.narrow(0, me * n, n)
    dist.reduce_scatter_tensor(out, buffer)
    report.check("float32 SUM output is a view of the input", out,
                 expected_reduction(inputs, "SUM", torch.float32)[me * n:(me + 1) * n],
                 same_on_all_ranks=False)
    return report


# ---- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("world", WORLDS)
def test_all_gather_every_form(pool, world):
    assert_reports_pass(pool.run(all_gather_forms), f"all_gather, world {world}")


@pytest.mark.parametrize("world", WORLDS)
def test_coalesced_collectives(pool, world):
    assert_reports_pass(pool.run(coalesced_forms), f"coalesced, world {world}")


@pytest.mark.parametrize("world", WORLDS)
def test_reduce_scatter_every_form(pool, world):
    assert_reports_pass(pool.run(reduce_scatter_forms), f"reduce_scatter, world {world}")


# The example of dist.all_gather_coalesced's docstring (torch 2.x), for 2 ranks: rank r passes
# DOC_INPUTS[r]; both ranks get output_tensor_lists == DOC_INPUTS (one list per RANK, each with
# one tensor per input).
DOC_INPUTS = [
    [[[1, 1], [1, 1]], [2], [3, 3]],
    [[[3, 3], [3, 3]], [5], [1, 1]],
]


def all_gather_coalesced_case(ctx):
    """torch's deprecated dist.all_gather_coalesced, by its documented convention: the docstring's
    own example (world 2), and for every world output_tensor_lists[r][i] == input i of rank r,
    the same as gloo's in the same run."""
    import warnings

    report = Report()
    w, me = ctx.world, ctx.rank
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        if w == 2:
            inputs = [torch.tensor(t, dtype=torch.int64) for t in DOC_INPUTS[me]]
            outputs = [[torch.full_like(t, -1) for t in inputs] for _ in range(w)]
            dist.all_gather_coalesced(outputs, inputs)
            for r in range(w):
                for i, t in enumerate(DOC_INPUTS[r]):
                    report.check(f"docstring example [{r}][{i}]", outputs[r][i],
                                 torch.tensor(t, dtype=torch.int64))
        specs = [(3, torch.float32), (0, torch.float32), (w + 2, torch.float32)]  # one dtype
        inputs = [payload(me, n, dtype, seed=i) for i, (n, dtype) in enumerate(specs)]
        outputs = [[torch.empty(n, dtype=dtype) for n, dtype in specs] for _ in range(w)]
        dist.all_gather_coalesced(outputs, inputs)
        report.check("reached all_gather_coalesced",
                     torch.tensor(_last_collective() == "all_gather_coalesced"), torch.tensor(True))
        gloo = [[torch.empty(n, dtype=dtype) for n, dtype in specs] for _ in range(w)]
        dist.all_gather_coalesced(gloo, inputs, group=ctx.gloo)
    for r in range(w):
        for i, (n, dtype) in enumerate(specs):
            report.check(f"rank {r}'s input {i}", outputs[r][i], payload(r, n, dtype, seed=i))
            report.check(f"rank {r}'s input {i} as gloo gathers it", outputs[r][i], gloo[r][i])
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_deprecated_all_gather_coalesced(pool, world):
    assert_reports_pass(pool.run(all_gather_coalesced_case), f"all_gather_coalesced, world {world}")
