"""Issue 25: ring's flight recorders dumped in torch's format. In a 3-rank job where rank 2
skips an all_reduce, `python -m torch_ring_backend.trace` on the three dumps names rank 2 and
that all_reduce; so does torch's own fr_trace, on torch releases that accept a backend outside
their list (2.15). The dumps hold what torch's entries hold: the group, sequence ids, sizes,
dtypes and states."""
import os
import pickle
import subprocess
import sys

import pytest

from fault_launcher import run_scenario

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    d = tmp_path_factory.mktemp("fr_dumps")
    auto = d / "auto"
    auto.mkdir()
    run = run_scenario("skipped_all_reduce", 3, extra_env={
        "RING_TEST_DUMP_DIR": str(d), "TORCH_FR_DUMP_TEMP_FILE": str(auto / "auto_rank_")})
    by_rank = run.by_rank()
    assert sorted(by_rank) == [0, 1, 2], run.outputs
    assert by_rank[0]["error"] and by_rank[1]["error"] and not by_rank[2]["error"], by_rank
    assert by_rank[2]["late_error"], by_rank
    return d


@pytest.fixture(scope="module")
def skipped_dumps(job):
    return job


def _run(args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m"] + args, capture_output=True, text=True,
                          timeout=120, env=env)


def test_the_dumps_hold_torchs_entry_fields(skipped_dumps):
    with open(skipped_dumps / "ring_trace_rank_0", "rb") as f:
        dump = pickle.load(f)
    assert dump["version"] == "2.10"
    assert dump["pg_config"]["0"] == {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}
    entries = dump["entries"]
    assert [e["collective_seq_id"] for e in entries] == [1, 2, 3, 4], entries
    assert [e["state"] for e in entries] == ["completed"] * 3 + ["started"], entries
    assert all(e["profiling_name"] == "ring:all_reduce" for e in entries)
    assert entries[0]["input_sizes"] == [[10]] and entries[3]["input_sizes"] == [[12]]
    assert entries[3]["input_dtypes"] == ["Float"] and entries[3]["output_dtypes"] == ["Float"]
    assert entries[0]["process_group"] == ("0", "default_pg")
    assert entries[3]["time_discovered_completed_ns"] is None
    assert entries[0]["time_created_ns"] <= entries[3]["time_created_ns"]


def test_trace_names_the_rank_that_skipped_and_the_collective(skipped_dumps):
    out = _run(["torch_ring_backend.trace", str(skipped_dumps)])
    assert out.returncode == 1, out.stdout + out.stderr
    assert ("group 0 (default_pg): all_reduce #4 did not complete on every rank: rank 0 started, "
            "rank 1 started; ranks [2] never issued it (their last: rank 2 all_reduce #3)"
            ) in out.stdout, out.stdout


def test_torchs_fr_trace_reads_them(skipped_dumps):
    import torch

    out = _run(["torch.distributed.flight_recorder.fr_trace", str(skipped_dumps),
                "--prefix", "ring_trace_rank_"])
    if out.returncode != 0 and "name formatting error?" in out.stderr:
        pytest.skip(f"torch {torch.__version__}'s fr_trace reads only its own backends' entries "
                    f"(2.15 accepts others)")
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    # torch 2.15's words for it.
    for line in ("Not all ranks joining collective, sequence number: 4", "collective: ring:all_reduce",
                 "missing ranks: {2}", "input sizes: [[12]]", "collective state: started"):
        assert line in text, text[-3000:]


def test_a_failure_writes_the_dump_by_itself_where_torch_fr_dump_temp_file_is_set(job):
    auto = job / "auto"
    assert sorted(os.listdir(auto)) == ["auto_rank_0", "auto_rank_1", "auto_rank_2"], os.listdir(auto)
    out = _run(["torch_ring_backend.trace", str(auto)])
    assert out.returncode == 1, out.stdout + out.stderr
    # Rank 2's broadcast, its fourth collective, failed on the broken group: its dump holds it.
    assert "all_reduce #4 did not complete on every rank" in out.stdout, out.stdout
    assert "ranks [2] called it differently: rank 0 ring:all_reduce [[12]] ['Float'], " \
           "rank 1 ring:all_reduce [[12]] ['Float'], rank 2 ring:broadcast [[12]] ['Float']" \
           in out.stdout, out.stdout


def test_trace_draws_the_job(skipped_dumps, tmp_path):
    png = tmp_path / "job.png"
    out = _run(["torch_ring_backend.trace", str(skipped_dumps), "--png", str(png)])
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", out.stdout + out.stderr
    import struct
    import zlib
    width, height = struct.unpack(">II", data[16:24])
    assert width == 1200 and height == 8 + 3 * 30, (width, height)
    # The rows hold red (a collective that never completed) for ranks 0 and 1 only.
    raw = zlib.decompress(data[data.index(b"IDAT") + 4:data.index(b"IEND") - 8])
    stride = 1 + 3 * width
    def row_has(y, rgb):
        line = raw[y * stride + 1:(y + 1) * stride]
        return any(tuple(line[i:i + 3]) == rgb for i in range(0, len(line), 3))
    red = (210, 40, 40)
    assert row_has(8 + 12, red) and row_has(8 + 30 + 12, red), "ranks 0 and 1 show their stuck call"
    assert not row_has(8 + 60 + 12, red), "rank 2 never issued it"


def test_a_signal_writes_the_dumps_while_a_collective_hangs(tmp_path):
    prefix = str(tmp_path / "rank_")
    run = run_scenario("dump_on_signal", 2, timeout_s=8.0, extra_env={
        "TORCH_RING_FR_DUMP_SIGNAL": "SIGUSR1", "TORCH_FR_DUMP_TEMP_FILE": prefix})
    by_rank = run.by_rank()
    assert sorted(by_rank) == [0, 1], run.outputs
    reader = by_rank[1]
    # SIGUSR1's default action ends the process; with the variable set it only dumps.
    assert reader["alive"], reader
    # Both dumps came while rank 0 still waited in its last all_reduce (it times out at 8 s):
    # all_gather_object's two collectives, three all_reduces, and rank 0's stuck one.
    assert reader["states"] == {"0": ["completed"] * 5 + ["started"], "1": ["completed"] * 5}, reader
    assert reader["sizes"]["0"][5] == [[12]], reader
    assert reader["seconds_to_dumps"] < 4.0, reader
    assert by_rank[0]["error"] == "DistBackendError" and by_rank[0]["elapsed"] > 7.0, by_rank[0]


def test_a_signal_the_dump_cannot_use_fails_set_up_by_name():
    run = run_scenario("setup_failure", 2, timeout_s=120.0,
                       extra_env={"RING_TEST_BAD_SETTING": "TORCH_RING_FR_DUMP_SIGNAL=SIGSEGV"})
    results = run.by_rank()
    assert results[1]["error"] == "RuntimeError", results[1]
    assert ("TORCH_RING_FR_DUMP_SIGNAL='SIGSEGV' is not a signal a flight-recorder dump can be "
            "asked with") in results[1]["message"], results[1]
    assert "rank 1 failed to set up" in results[0]["message"], results[0]
    assert results[0]["elapsed"] < 10.0, results[0]


def _shapes_of_the_tensor_forms(ctx):
    """all_gather_into_tensor and reduce_scatter_tensor, whose inputs and outputs differ in shape,
    then the two entries of this rank's dump that they made."""
    import torch
    import torch.distributed as dist
    import torch_ring_backend

    n = ctx.world
    part = torch.zeros(3, dtype=torch.bfloat16)
    whole = torch.empty(3 * n, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(whole, part)
    out = torch.empty(2, 1)
    dist.reduce_scatter_tensor(out, torch.ones(2 * n, 1))
    entries = torch_ring_backend.flight_recorder_dump()["entries"][-2:]
    return [(e["input_sizes"], e["input_dtypes"], e["output_sizes"], e["output_dtypes"])
            for e in entries]


def test_the_dump_lists_inputs_and_outputs_of_the_tensor_forms(pools):
    # torch's entries list each input tensor's and each output tensor's shape and dtype name
    # (fr_trace compares them across ranks): a gather's input is one rank's part, its output
    # the whole; a reduce-scatter's the other way round.
    for rank, got in enumerate(pools.get(2).run(_shapes_of_the_tensor_forms)):
        assert got == [([[3]], ["BFloat16"], [[6]], ["BFloat16"]),
                       ([[4, 1]], ["Float"], [[2, 1]], ["Float"])], f"rank {rank}: {got}"
