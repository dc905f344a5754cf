"""Environment knobs as a user sets them, in separate processes (issue 16): the interface
choice in NCCL_SOCKET_IFNAME's syntax with GLOO_SOCKET_IFNAME as the fallback, the log line
prefix (UTC time, host:pid, rank, group, level), and TORCH_RING_DEBUG_FILE's per-rank files.
The syntax itself is tested against NCCL's documented forms in tests/cpp/test_net_address.cc."""
import glob
import os
import platform
import re
import socket

import pytest

from fault_launcher import run_scenario

# One log line: "[torch_ring 2026-11-30T19:06:59.123456Z host:4242 rank 1 group 'g' INFO] text".
LINE = re.compile(r"^\[torch_ring (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) (\S+):(\d+)"
                  r"( rank (\d+) group '([^']*)')? (WARN|INFO|TRACE)\] (.*)$")


def ring_lines(text):
    return [line for line in text.splitlines() if line.startswith("[torch_ring")]


def debug_run(env, world=2):
    return run_scenario("debug_log", world, extra_env=dict({"TORCH_RING_DEBUG": "INFO"}, **env),
                        timeout_s=30.0)


def test_log_lines_carry_time_host_pid_rank_and_group():
    run = debug_run({})
    for rank, text in enumerate(run.outputs):
        lines = ring_lines(text)
        assert lines, text
        for line in lines:
            m = LINE.match(line)
            assert m, line
            assert m.group(2) == socket.gethostname(), line
            # Every line of this run is logged for a group: set-up, links, the collective.
            assert m.group(5) == str(rank) and m.group(6), line
        assert any("ring order 0 -> 1" in l for l in lines) == (rank == 0), lines


def test_gloo_socket_ifname_is_the_fallback():
    run = debug_run({"TORCH_RING_TRANSPORT": "tcp", "GLOO_SOCKET_IFNAME": "lo"})
    for text in run.outputs:
        assert re.search(r"TCP transport listening on 127\.0\.0\.1:\d+ \(interface lo, chosen by "
                         r"GLOO_SOCKET_IFNAME='lo' \(exact names\)\)", text), text
    assert all(r["ok"] for r in run.every_rank(2).values()), run.outputs


def test_torch_ring_socket_ifname_wins_and_takes_a_list():
    run = debug_run({"TORCH_RING_TRANSPORT": "tcp", "GLOO_SOCKET_IFNAME": "nosuchif0",
                     "TORCH_RING_SOCKET_IFNAME": "nosuchif1,lo"})
    for text in run.outputs:
        assert re.search(r"listening on 127\.0\.0\.1:\d+ \(interface lo, chosen by "
                         r"TORCH_RING_SOCKET_IFNAME='nosuchif1,lo'\)", text), text
    assert all(r["ok"] for r in run.every_rank(2).values()), run.outputs


def test_an_interface_spec_that_matches_nothing_fails_set_up_with_the_interfaces():
    run = run_scenario("secret", 2, timeout_s=60.0,
                       extra_env={"TORCH_RING_TRANSPORT": "tcp", "RING_TEST_SECRETS": ",",
                                  "TORCH_RING_SOCKET_IFNAME": "=nosuchif"})
    for r in run.every_rank(2).values():
        assert r["error"] is not None, r
        assert "TORCH_RING_SOCKET_IFNAME='=nosuchif' matches no interface" in r["message"], r
        assert "lo (127.0.0.1)" in r["message"], r
        assert r["elapsed"] < 20.0, r


def test_debug_file_per_rank_with_host_pid_and_rank_expanded(tmp_path):
    pattern = str(tmp_path / "ring.%h.%p.%r.log")
    run = debug_run({"TORCH_RING_DEBUG_FILE": pattern})
    host = socket.gethostname()
    for rank in (0, 1):
        files = glob.glob(str(tmp_path / f"ring.{host}.*.{rank}.log"))
        assert len(files) == 1, os.listdir(tmp_path)
        pid = files[0].split(".")[-3]
        lines = ring_lines(open(files[0]).read())
        assert lines, files[0]
        for line in lines:
            m = LINE.match(line)
            assert m and m.group(3) == pid and m.group(5) == str(rank), line
    # Nothing of ours on the terminal.
    for text in run.outputs:
        assert not ring_lines(text), text


def test_ranks_with_different_all_reduce_plans_fail_at_set_up_naming_the_knob():
    # Only rank 1 sets TORCH_RING_ALGO: the plans are compared at set-up (executor/plan_choice.h),
    # so each rank fails there naming the knob, instead of running another plan than its peers.
    run = run_scenario("setup_failure", 2, timeout_s=120.0,
                       extra_env={"RING_TEST_BAD_SETTING": "TORCH_RING_ALGO=hier_rd"})
    for rank, r in run.every_rank(2).items():
        assert r["error"] is not None, r
        assert "every rank must set TORCH_RING_ALGO and TORCH_RING_RD_BYTES alike" in r["message"] \
            or "failed to set up" in r["message"], r
        assert r["elapsed"] < 20.0, r
    assert "algo=hier_rd" in run.by_rank()[1]["message"], run.by_rank()[1]


def test_an_unknown_all_reduce_plan_fails_set_up_by_name():
    run = run_scenario("setup_failure", 2, timeout_s=120.0,
                       extra_env={"RING_TEST_BAD_SETTING": "TORCH_RING_ALGO=tree"})
    results = run.by_rank()
    assert "TORCH_RING_ALGO='tree' must be auto, ring, hier_ring, hier_rd, hier_radix or hier_direct" in \
        results[1]["message"], results[1]
    assert "rank 1 failed to set up" in results[0]["message"], results[0]


def test_a_malformed_link_price_fails_set_up_by_name():
    # TORCH_RING_NET_LINK prices the rings auto chooses between (schedule/ring_costs.h); a value
    # that is not ALPHA_SECONDS,BYTES_PER_SECOND is an error at set-up, not a silent default.
    run = run_scenario("setup_failure", 2, timeout_s=120.0,
                       extra_env={"RING_TEST_BAD_SETTING": "TORCH_RING_NET_LINK=10GbE"})
    results = run.by_rank()
    assert "TORCH_RING_NET_LINK='10GbE' must be ALPHA_SECONDS,BYTES_PER_SECOND" in \
        results[1]["message"], results[1]
    assert "rank 1 failed to set up" in results[0]["message"], results[0]


@pytest.mark.parametrize("value,words", [
    ("500", "TORCH_RING_LINK_SILENCE_MS='500' is too short: 0 (off) or at least 1000 ms"),
    ("5s", "TORCH_RING_LINK_SILENCE_MS='5s' is not an integer in [0, 86400000]"),
])
def test_a_link_silence_bound_that_cannot_work_fails_set_up_by_name(value, words):
    # Under four of the 250 ms heartbeats a live peer sends, one late heartbeat would condemn it.
    run = run_scenario("setup_failure", 2, timeout_s=120.0,
                       extra_env={"RING_TEST_BAD_SETTING": f"TORCH_RING_LINK_SILENCE_MS={value}"})
    results = run.by_rank()
    assert words in results[1]["message"], results[1]
    assert "rank 1 failed to set up" in results[0]["message"], results[0]


def _reductions_of_every_float_kind(ctx):
    # All_reduces whose results show the host reduction's every path: float16 (F16C in the AVX2
    # build), bfloat16 and float32, SUM, MAX, MIN, PRODUCT, AVG (the division) and PREMUL_SUM
    # (the scaling, by a factor that is not a float), at sizes that take the vector loop, its
    # tail, and a ring slice; random values with zeros, infinities and NaNs among them.
    # Returns each result's bytes, keyed by its case.
    import torch
    import torch.distributed as dist
    out = {}
    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
           "product": dist.ReduceOp.PRODUCT, "avg": dist.ReduceOp.AVG,
           "premul_sum": dist._make_nccl_premul_sum(3.353773474374694)}
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for name, op in ops.items():
            for n in (7, 1037, 300_000):
                g = torch.Generator().manual_seed(1000 * ctx.rank + n)
                t = (torch.randn(n, generator=g) * 4).to(dtype)
                t[::17] = 0.0
                t[5::101] = float("inf")
                t[9::211] = float("nan")
                dist.all_reduce(t, op=op)
                bits = t.view(torch.int16 if t.element_size() == 2 else torch.int32)
                out[f"{dtype} {name} {n}"] = bits.numpy().tobytes()
    return out


def test_the_portable_reduction_gives_the_bits_of_the_default_one(pools):
    # TORCH_RING_CPU_ISA=baseline serves the portable loops (reduce/reduce_table.h); on a CPU
    # with AVX2 and F16C the default serves the vector ones. Ranks on CPUs with and without
    # them must hold the same results, so the two builds must give the same bits. The NaNs
    # here (NaN inputs, inf - inf, 0 * inf) are the default quiet NaNs, which both builds
    # round to the same float16 bits, so the comparison is bytewise throughout.
    portable = pools.get(2, env={"TORCH_RING_CPU_ISA": "baseline"}).run(
        _reductions_of_every_float_kind)
    default = pools.get(2).run(_reductions_of_every_float_kind)
    for rank in range(2):
        assert portable[rank].keys() == default[rank].keys()
        for case, bits in default[rank].items():
            assert portable[rank][case] == bits, f"rank {rank}: {case} differs between the builds"
    assert portable[0] == portable[1], "the ranks differ"


def test_an_unknown_cpu_isa_fails_set_up_by_name():
    run = run_scenario("setup_failure", 2, timeout_s=120.0,
                       extra_env={"RING_TEST_BAD_SETTING": "TORCH_RING_CPU_ISA=sse"})
    results = run.by_rank()
    assert "TORCH_RING_CPU_ISA='sse' must be auto, baseline, avx2, avx512 or neon (any case)" in \
        results[1]["message"], results[1]
    assert "rank 1 failed to set up" in results[0]["message"], results[0]


def test_the_log_names_the_reduction_build_the_knob_chose():
    # auto serves the widest build the CPU has (its own /proc/cpuinfo flags): AVX-512 F/BW/DQ/VL
    # (with AVX2 and F16C), else AVX2 with F16C, else the portable one; baseline always serves
    # the portable one. Each rank says which at INFO.
    flags = set(open("/proc/cpuinfo").read().split())
    avx2 = {"avx2", "f16c"} <= flags
    avx512 = avx2 and {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags
    widest = "avx512" if avx512 else "avx2" if avx2 else "baseline"
    if platform.machine() == "aarch64":  # its "Features" line: Advanced SIMD and FP
        widest = "neon" if {"asimd", "fp"} <= flags else "baseline"
    for knob, build in ((None, widest), ("baseline", "baseline")):
        env = {"TORCH_RING_CPU_ISA": knob} if knob else {}
        run = debug_run(env)
        for text in run.outputs:
            want = f"host reductions: {build} build (TORCH_RING_CPU_ISA={knob or 'auto'})"
            assert want in text, text
