"""bench/spread.py: the slowest/fastest ratio per (collective, size) across runs, checked
against hand-computed ratios on rows written here, and its refusals of runs that differ."""
import json
import subprocess
import sys

import pytest

from torch_ring_backend.bench import spread


def _write(path, times, world=2, dtype="float32"):
    rows = [{"collective": c, "bytes": b, "dtype": dtype, "time_us": t}
            for (c, b), t in times.items()]
    path.write_text(json.dumps({"meta": {"world_size": world}, "rows": rows}))
    return str(path)


def _run(*args):
    return subprocess.run([sys.executable, "-m", "torch_ring_backend.bench.spread", *args],
                          capture_output=True, text=True, timeout=60)


def test_every_run_lines_up_by_collective_and_size(tmp_path):
    a = _write(tmp_path / "a.json", {("all_reduce", 8): 10.0, ("broadcast", 8): 4.0})
    b = _write(tmp_path / "b.json", {("broadcast", 8): 5.0, ("all_reduce", 8): 20.0})
    assert spread.spread([a, b]) == {("all_reduce", 8): [10.0, 20.0], ("broadcast", 8): [4.0, 5.0]}


def test_exit_0_at_the_limit_and_1_just_over_it(tmp_path):
    # 15 / 10 = 1.5 is within --limit 1.5; 10.64 / 7 = 1.52 is not (the last row: every row counts).
    runs = [{("all_reduce", 8): 10.0, ("all_reduce", 16): 7.0},
            {("all_reduce", 8): 15.0, ("all_reduce", 16): 7.7},
            {("all_reduce", 8): 12.0, ("all_reduce", 16): 7.0}]
    paths = [_write(tmp_path / f"r{i}.json", t) for i, t in enumerate(runs)]
    r = _run(*paths, "--limit", "1.5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 of 2 sizes within 1.5x; worst 1.50x (all_reduce 8 B)" in r.stdout, r.stdout
    runs[1][("all_reduce", 16)] = 10.64
    paths = [_write(tmp_path / f"r{i}.json", t) for i, t in enumerate(runs)]
    r = _run(*paths, "--limit", "1.5")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 of 2 sizes within 1.5x; worst 1.52x (all_reduce 16 B)" in r.stdout, r.stdout
    over = [line for line in r.stdout.splitlines() if line.endswith("over")]
    assert len(over) == 1 and over[0].split()[0] == "16", r.stdout


@pytest.mark.parametrize("second, needle", [
    ({("all_reduce", 8): 1.0, ("all_reduce", 32): 1.0}, "not the same collectives and sizes"),
    ("world", "world size, dtype"),
    ("garbage", "not a torch-ring-bench --json file"),
    ({("all_reduce", 8): 0.0, ("all_reduce", 16): 1.0}, "not positive"),
])
def test_runs_that_cannot_be_compared_exit_2_with_one_line(tmp_path, second, needle):
    first = _write(tmp_path / "a.json", {("all_reduce", 8): 1.0, ("all_reduce", 16): 1.0})
    if second == "world":
        other = _write(tmp_path / "b.json", {("all_reduce", 8): 1.0, ("all_reduce", 16): 1.0}, world=4)
    elif second == "garbage":
        (tmp_path / "b.json").write_text("{not json")
        other = str(tmp_path / "b.json")
    else:
        other = _write(tmp_path / "b.json", second)
    r = _run(first, other)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr


def test_a_single_run_is_refused(tmp_path):
    r = _run(_write(tmp_path / "a.json", {("all_reduce", 8): 1.0}))
    assert r.returncode == 2 and "at least 2 runs" in r.stderr, r.stderr
