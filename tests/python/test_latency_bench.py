"""torch-ring-bench --latency (issue 26): the summary from per-call times (checked on made-up
numbers whose statistics are known in closed form), and one small real run of the tool."""
import json
import os
import subprocess
import sys

import pytest

from torch_ring_backend.bench.latency import format_summary, stats, summarize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_stats_of_one_job():
    times = list(range(1, 101))  # 1..100 us
    s = stats(times)
    assert s["median"] == 50.5 and s["mean"] == 50.5
    assert s["p90"] == 91 and s["p99"] == 100  # the value at index q*n of the sorted list


def _job(ring_us, fake_us, mpi_us, cold_us, probe):
    return {"cold": [cold_us] * 200, "ring": {"4096": [ring_us] * 50},
            "fake": {"4096": [fake_us] * 50}, "mpi": {"4096": [mpi_us] * 50},
            "probe_ms": {"cold": probe, "ring:4096": probe, "fake:4096": 9.9, "mpi:4096": probe},
            "probe_ms_rank0": {"cold": probe, "ring:4096": probe, "fake:4096": probe},
            "fake_slowest_median": {"4096": fake_us * 1.5}}


def test_summary_spread_goal_and_normalization():
    # Two jobs: the second on cores at half speed (probe 1.5 ms against 0.75), every backend
    # twice as slow in it.
    jobs = [_job(6.0, 3.0, 2.0, 9.0, 0.75), _job(12.0, 6.0, 4.0, 12.0, 1.5)]
    s = summarize({2: jobs})[2]
    ring = s["rows"][("ring", 4096)]
    assert ring["best_median"] == 6.0 and ring["worst_median"] == 12.0
    assert ring["median_of_medians"] == 9.0
    # Over the slowest rank's fake median both jobs take 4/3: no spread of ring's own.
    assert ring["normalized_spread"] == pytest.approx(1.0)
    assert s["rows"][("fake", 4096)]["normalized_spread"] is None
    g = s["goal"]
    assert g["worst_over_best_median"] == 2.0
    assert g["worst_over_best_normalized"] == pytest.approx(1.0)
    assert g["worst_cold200_over_median"] == 1.5  # 9 us cold over a 6 us median
    assert g["ring_share_us"] == 9.0 - 4.5 and g["mpi_median_us"] == 3.0
    assert g["ring_over_mpi"] == 3.0
    # Per job, ring over the slowest rank's fake median (1.5x rank 0's here): 6/4.5 and 12/9.
    assert g["ring_over_slowest_fake"] == pytest.approx(4 / 3)
    text = format_summary(summarize({2: jobs}))
    assert "ring 4 KiB job medians: 6.0, 12.0" in text, text


def test_a_small_run_of_the_tool(tmp_path):
    out = tmp_path / "lat.json"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "torch_ring_backend.bench", "--latency",
                           "--jobs", "2", "--nproc", "2", "--sizes", "8,4K", "--calls", "50",
                           "--settle", "10", "--reference", "fake", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    jobs = data["results"]["2"]
    assert len(jobs) == 2
    for job in jobs:
        assert len(job["cold"]) == 200 and sorted(job["ring"]) == ["4096", "8"]
        assert len(job["ring"]["4096"]) == 50 and len(job["fake"]["8"]) == 50
        assert all(t > 0 for t in job["ring"]["4096"])
        assert set(job["probe_ms"]) == {"cold", "ring:8", "ring:4096", "fake:8", "fake:4096"}
        assert set(job["probe_ms_rank0"]) == set(job["probe_ms"])
        assert sorted(job["fake_slowest_median"]) == ["4096", "8"]
        assert all(job["probe_ms"][k] >= job["probe_ms_rank0"][k] for k in job["probe_ms"])
    assert "world 2: microseconds per all_reduce" in done.stdout, done.stdout


def test_bad_arguments_are_refused():
    done = subprocess.run([sys.executable, "-m", "torch_ring_backend.bench", "--latency",
                           "--reference", "gloo"], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 2 and "--reference takes mpi, fake or none" in done.stderr, done.stderr
