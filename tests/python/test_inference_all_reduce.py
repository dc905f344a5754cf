"""torch_ring_backend.inference_all_reduce: ring's all_reduce of one CPU tensor, called without
torch.distributed's wrapper and Work, as DeepSpeed's inference_all_reduce is called by
tensor-parallel inference. The contract is dist.all_reduce's (torch's documentation: in place,
the reduction of every rank's tensor with `op`, on every rank): its results are the closed form
of each (dtype, op) on inputs whose reduction is exact in any order, bitwise the same as
dist.all_reduce over ring and on every rank, on the whole world and on a subgroup. It is one of
the group's collectives (an "all_reduce" entry in the group's flight recorder, numbered with
the others); what it cannot do is refused by name before anything is queued."""
import pytest
import torch
import torch.distributed as dist

import torch_ring_backend
from checks import Report, assert_reports_pass
from harness import WORLDS
from reference import exact_input, expected_reduction, reduce_op

# Through the mailbox (4 KiB), a direct round and the ring (past TORCH_RING_DIRECT_BYTES).
COUNTS = (1, 1000, 70000)
CASES = ((torch.float32, "SUM"), (torch.float32, "MAX"), (torch.bfloat16, "SUM"),
         (torch.float32, "AVG"), (torch.int32, "PRODUCT"), (torch.int64, "MIN"))


def results_as_dist_all_reduce(ctx):
    report = Report()
    subgroup = dist.new_group(list(range(0, ctx.world, 2)))  # ranks 0, 2, ...
    for seed, (dtype, op) in enumerate(CASES):
        for count in COUNTS:
            label = f"{dtype} {op} x{count}"
            inputs = [exact_input(r, count, dtype, op, seed) for r in range(ctx.world)]
            mine = inputs[ctx.rank].clone()
            torch_ring_backend.inference_all_reduce(mine, reduce_op(op))
            report.check(label, mine, expected_reduction(inputs, op, dtype))
            through_dist = inputs[ctx.rank].clone()
            dist.all_reduce(through_dist, reduce_op(op))
            report.check(f"{label} against dist.all_reduce", mine, through_dist)
            if ctx.rank % 2 == 0:
                members = list(range(0, ctx.world, 2))
                part = inputs[ctx.rank].clone()
                torch_ring_backend.inference_all_reduce(part, reduce_op(op), group=subgroup)
                report.check(f"{label} on ranks {members}", part,
                             expected_reduction([inputs[r] for r in members], op, dtype),
                             same_on_all_ranks=False)
    dist.destroy_process_group(subgroup)
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_results_are_dist_all_reduces(pool, world):
    assert_reports_pass(pool.run(results_as_dist_all_reduce), "inference_all_reduce")


def one_collective_of_the_group(ctx):
    """Between two dist.all_reduce calls, the flight recorder holds three consecutive
    all_reduce entries, the middle one inference_all_reduce's, completed."""
    t = torch.ones(16)
    dist.all_reduce(t)
    torch_ring_backend.inference_all_reduce(t)
    dist.all_reduce(t)
    entries = torch_ring_backend.flight_recorder()[-3:]
    return {"t": t, "collectives": [e["collective"] for e in entries],
            "seqs": [e["seq"] for e in entries], "states": [e["state"] for e in entries]}


@pytest.mark.parametrize("world", [2, 3])
def test_it_is_a_collective_of_the_group(pool, world):
    for rank, r in enumerate(pool.run(one_collective_of_the_group)):
        assert torch.equal(r["t"], torch.full((16,), float(world ** 3))), f"rank {rank}"
        assert r["collectives"] == ["all_reduce"] * 3, r
        first = r["seqs"][0]
        assert r["seqs"] == [first, first + 1, first + 2], r
        assert r["states"] == ["completed"] * 3, r


def refusals(ctx):
    report = Report()
    report.check_raises("a tensor not on the CPU",
                        lambda: torch_ring_backend.inference_all_reduce(
                            torch.empty(4, device="meta")),
                        ["ring", "inference_all_reduce", f"rank {ctx.rank}", "expected a CPU tensor",
                         "meta"])
    report.check_raises("a non-contiguous tensor",
                        lambda: torch_ring_backend.inference_all_reduce(torch.ones(4, 6).t()),
                        ["ring", "all_reduce", "not contiguous"])

    def in_a_coalescing_block():
        # What dist._coalescing_manager(device=...) does around its block (by hand, so that the
        # block ends even though the call in it raises).
        pg, cpu = dist.group.WORLD, torch.device("cpu")
        pg._start_coalescing(cpu)
        try:
            torch_ring_backend.inference_all_reduce(torch.ones(4))
        finally:
            pg._end_coalescing(cpu).wait()

    report.check_raises("inside a coalescing block", in_a_coalescing_block,
                        ["ring", "inference_all_reduce", "coalescing block"])
    report.check_raises("a group of another backend",
                        lambda: torch_ring_backend.inference_all_reduce(torch.ones(4),
                                                                        group=ctx.gloo),
                        ["not ring"], exception=ValueError, group=None)
    # The group is still usable: every rank refused every call alike.
    t = torch.ones(8)
    torch_ring_backend.inference_all_reduce(t)
    report.check("after the refusals", t, torch.full((8,), float(ctx.world)))
    return report


@pytest.mark.parametrize("world", [2])
def test_what_it_cannot_do_is_refused_by_name(pool, world):
    assert_reports_pass(pool.run(refusals), "inference_all_reduce refusals")


def test_bench_column_is_checked_and_other_collectives_refused(tmp_path):
    """torch-ring-bench --reference ring_inference: its all_reduce results checked against the
    benchmark's closed forms at sizes through the mailbox and the ring, its ratio beside ring's,
    and a collective it does not have refused by name (ring's columns stay)."""
    import json
    import os
    import subprocess
    import sys

    out_json = tmp_path / "rows.json"
    r = subprocess.run([sys.executable, "-m", "torch_ring_backend.bench", "--nproc", "2",
                        "-b", "4K", "-e", "512K", "--warmup", "1", "--iters", "3",
                        "--collectives", "all_reduce,all_gather", "--reference",
                        "ring_inference", "--json", str(out_json)],
                       capture_output=True, text=True, timeout=600, cwd=str(tmp_path),
                       env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(out_json.read_text())["rows"]
    reduces = [row for row in rows if row["collective"] == "all_reduce"]
    gathers = [row for row in rows if row["collective"] == "all_gather"]
    assert len(reduces) >= 3 and gathers, rows
    for row in reduces:
        ri = row["references"]["ring_inference"]
        assert ri["refused"] is None and ri["time_us"] > 0 and ri["wrong"] == 0, row
        assert ri["ratio"] == pytest.approx(ri["time_us"] / row["time_us"]), row
    for row in gathers:
        assert row["references"]["ring_inference"]["refused"].startswith(
            "torch_ring_backend.inference_all_reduce is an all_reduce only"), row
        assert row["wrong"] == 0, row
