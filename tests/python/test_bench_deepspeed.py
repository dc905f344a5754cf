"""torch-ring-bench --reference deepspeed: DeepSpeed's shared-memory all_reduce op, built by
DeepSpeed's own op builder, measured beside ring in the same ranks. Its results are checked
against the benchmark's closed forms (an implementation outside this project agreeing with
them); what the op would get silently wrong (MAX, other dtypes, other collectives) is refused by
name; its /dev/shm workspaces are gone after the run. Needs `pip install deepspeed` (0.19.8 was
read and tested); skipped without it."""
import glob
import json
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("deepspeed", reason="the DeepSpeed reference needs deepspeed "
                                        "(pip install deepspeed)")

# DeepSpeed's workspace files (shm.cpp: deepspeed_allreduce_buffer_<uid>_<addr>_<port>_<rank>).
WORKSPACES = f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*"


def _run_bench(args, tmp_path, env=None):
    return subprocess.run([sys.executable, "-m", "torch_ring_backend.bench", *args],
                          capture_output=True, text=True, timeout=600, cwd=str(tmp_path),
                          env=dict(os.environ, **(env or {})))


def _has_avx512bw():
    with open("/proc/cpuinfo") as f:
        return " avx512bw" in f.read()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_deepspeed_columns_are_checked_and_its_workspaces_removed(tmp_path, dtype):
    """Sizes on both of DeepSpeed's algorithms (every rank reducing the whole message below
    1 MiB; each rank its slice from 1 MiB), odd counts included (its last slice takes the
    remainder): DeepSpeed's sum matches the closed form at each, and no workspace file of the
    run is left in /dev/shm (DeepSpeed itself never unlinks them). On a CPU without AVX-512BW
    DeepSpeed's bfloat16 kernel would die of SIGILL: there every row must say so by name, with
    ring's own columns measured and right."""
    refused = dtype == "bfloat16" and not _has_avx512bw()
    before = set(glob.glob(WORKSPACES))
    out_json = tmp_path / "rows.json"
    r = _run_bench(["--nproc", "2", "-b", "6", "-e", "3M", "--warmup", "1", "--iters", "3",
                    "--dtype", dtype, "--reference", "deepspeed", "--json", str(out_json)],
                   tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out_json.read_text())
    assert data["meta"]["references"] == ["deepspeed"]
    rows = data["rows"]
    assert max(row["bytes"] for row in rows) >= 2 * 1024 * 1024, [row["bytes"] for row in rows]
    assert any(row["count"] % 2 for row in rows), [row["count"] for row in rows]
    if refused:
        refusal = "DeepSpeed's torch.bfloat16 kernel needs AVX-512BW, which this CPU lacks"
        for row in rows:
            assert row["references"]["deepspeed"]["refused"] == refusal, row
            assert row["wrong"] == 0 and row["time_us"] > 0, row
        assert f"deepspeed refused: {refusal}" in r.stdout, r.stdout
        assert set(glob.glob(WORKSPACES)) == before, sorted(set(glob.glob(WORKSPACES)) - before)
        return
    for row in rows:
        ds = row["references"]["deepspeed"]
        assert ds["refused"] is None and ds["time_us"] > 0, row
        assert ds["wrong"] == 0 and row["wrong"] == 0, row
        assert ds["ratio"] == pytest.approx(ds["time_us"] / row["time_us"]), row
    assert "ring/deepspeed" in r.stdout, r.stdout
    assert set(glob.glob(WORKSPACES)) == before, sorted(set(glob.glob(WORKSPACES)) - before)


@pytest.mark.parametrize("args, refusal", [
    (["--op", "max"], "DeepSpeed's shared-memory op sums whatever op it is given"),
    (["--dtype", "int32"], f"DeepSpeed's shared-memory op returns {torch.int32} unchanged"),
    (["--collectives", "all_gather"], "DeepSpeed's shared-memory op has all_reduce only"),
])
def test_what_deepspeed_gets_silently_wrong_is_refused_by_name(tmp_path, args, refusal):
    """DeepSpeed's op returns the sum for MAX and integer tensors unchanged, without an error;
    the benchmark must say so instead of timing a wrong answer (ring's columns stay)."""
    out_json = tmp_path / "rows.json"
    r = _run_bench(["--nproc", "2", "-b", "4K", "-e", "8K", "--warmup", "1", "--iters", "2",
                    "--reference", "deepspeed", "--json", str(out_json), *args], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(out_json.read_text())["rows"]
    assert rows and all((row["references"]["deepspeed"]["refused"] or "").startswith(refusal)
                    for row in rows), rows
    assert all(row["wrong"] == 0 and row["time_us"] > 0 for row in rows), rows
    assert f"deepspeed refused: {refusal}" in r.stdout, r.stdout


def test_deepspeed_reference_refuses_ranks_of_several_hosts(tmp_path):
    """Under torchrun with ranks on several hosts DeepSpeed's op would not map shared memory
    (and DeepSpeed's Python would time its fallback): refused before any rank starts."""
    r = _run_bench(["--reference", "deepspeed"], tmp_path,
                   env={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1"})
    assert r.returncode == 2 and "every rank on one host" in r.stderr, r.stdout + r.stderr
