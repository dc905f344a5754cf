"""all_reduce with async_op=True: the Work contract DDP and comm hooks rely on, and in-order
completion of collectives issued back to back."""
import pytest
import torch
import torch.distributed as dist

from checks import Report, assert_reports_pass
from harness import WORLDS
from reference import exact_input, expected_reduction, reduce_op


def work_contract(ctx):
    x = torch.full((1000,), float(ctx.rank + 1))
    work = dist.all_reduce(x, async_op=True)
    waited = work.wait()
    value = work.get_future().value()
    # The comm-hook pattern: chain on the future instead of waiting on the Work.
    y = torch.full((10,), float(ctx.rank + 1))
    chained = dist.all_reduce(y, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    return {
        "wait": waited,
        "is_completed": work.is_completed(),
        "is_success": work.is_success(),
        "exception": work.exception(),
        "future_done": work.get_future().done(),
        "value_is_output": [t.data_ptr() for t in value] == [x.data_ptr()],
        "value": value,
        "x": x,
        "chained": chained.wait(),
    }


def back_to_back(ctx):
    """Issues several collectives without waiting, then checks they finished in issue order."""
    report = Report()
    # SUM then PRODUCT on one tensor: the other order gives a different answer.
    a = torch.full((4099,), float(ctx.rank + 1), dtype=torch.float64)
    works = [dist.all_reduce(a, op=dist.ReduceOp.SUM, async_op=True),
             dist.all_reduce(a, op=dist.ReduceOp.PRODUCT, async_op=True)]
    batch = []
    for i, (n, op) in enumerate([(0, "SUM"), (1, "MAX"), (ctx.world + 1, "MIN"), (1009, "SUM"),
                                 (2**18, "PRODUCT"), (5, "AVG"), (2**16, "BXOR"), (7, "SUM")]):
        dtype = torch.int32 if op == "BXOR" else torch.float32
        inputs = [exact_input(r, n, dtype, op, seed=i) for r in range(ctx.world)]
        t = inputs[ctx.rank].clone()
        works.append(dist.all_reduce(t, op=reduce_op(op), async_op=True))
        batch.append((f"#{i} {op} n={n}", t, expected_reduction(inputs, op, dtype)))
    # The caller keeps no reference to this tensor: the Work must keep it alive until done.
    unowned = dist.all_reduce(torch.full((2**18,), float(ctx.rank + 1)), async_op=True)
    works.append(unowned)
    scratch = [torch.full((2**18,), -1.0) for _ in range(4)]  # would reuse freed memory
    works[-1].wait()
    pending = [i for i, w in enumerate(works) if not w.is_completed()]
    if pending:
        report.failures.append(f"works {pending} not completed when the last one was")
    for w in works:
        w.wait()
    total = ctx.world * (ctx.world + 1) / 2
    report.check("SUM then PRODUCT", a, torch.full_like(a, total ** ctx.world))
    for label, got, want in batch:
        report.check(label, got, want)
    report.check("tensor held only by its Work", unowned.result()[0],
                 torch.full((2**18,), total))
    del scratch
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_work_contract(pool, world):
    total = world * (world + 1) / 2
    for rank, r in enumerate(pool.run(work_contract)):
        assert r["wait"] is True, f"rank {rank}"
        assert r["is_completed"] and r["is_success"] and r["future_done"], f"rank {rank}: {r}"
        assert r["exception"] is None, f"rank {rank}"
        assert r["value_is_output"], f"rank {rank}: the future's value is not the output tensor"
        assert len(r["value"]) == 1 and torch.equal(r["value"][0], r["x"]), f"rank {rank}"
        assert torch.equal(r["x"], torch.full((1000,), total)), f"rank {rank}: {r['x'][:4]}"
        assert torch.equal(r["chained"], torch.full((10,), 2 * total)), f"rank {rank}"


@pytest.mark.parametrize("world", WORLDS)
def test_back_to_back_async_complete_in_order(pool, world):
    assert_reports_pass(pool.run(back_to_back), f"async back to back, world {world}")
