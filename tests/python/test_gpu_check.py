"""The mechanics of scripts/gpu_check.sh, run without a GPU: the GPU machine is lent for minutes,
so the check must work the first time there. Each test stands for one way an earlier version
lost those minutes: a probe whose child could never start, a test phase killed before pytest
wrote its counts, a summary that needed files a stopped run never made, a plan over its time.
(The whole script, dry-run end to end with the prebuilt module, is in scripts/torch_matrix.sh.)
"""
import os
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "scripts")
sys.path.insert(0, SCRIPTS)

import gpu_check_summary  # noqa: E402


def test_the_probe_spawns_its_child_from_a_file_and_hears_back_within_its_wait():
    start = time.monotonic()
    res = subprocess.run([sys.executable, os.path.join(SCRIPTS, "gpu_probe.py"), "--device", "cpu",
                          "--wait", "20"], capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - start
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cpu shared memory between processes: works" in res.stdout, res.stdout + res.stderr
    assert elapsed < 30, f"the probe took {elapsed:.0f} s: its wait is 20 s"


def test_the_probe_says_why_when_the_child_never_answers():
    # A wait shorter than a spawned interpreter's start: the answer is the reason, at once.
    res = subprocess.run([sys.executable, os.path.join(SCRIPTS, "gpu_probe.py"), "--device", "cpu",
                          "--wait", "0.01"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert "cpu shared memory between processes: FAILED: no answer within 0.01 s" in res.stdout


SLOW_TESTS = textwrap.dedent("""
    import time
    def test_first():
        pass
    def test_hangs():
        time.sleep(120)
    def test_never_reached():
        pass
""")


def test_a_test_phase_stopped_at_its_cap_still_leaves_its_counts(tmp_path):
    tests = tmp_path / "test_phase.py"
    tests.write_text(SLOW_TESTS)
    xml, log = tmp_path / "tests.xml", tmp_path / "tests.log"
    start = time.monotonic()
    res = subprocess.run(["bash", os.path.join(SCRIPTS, "gpu_check_pytest.sh"), "14", str(xml),
                          str(log), str(tests)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, env={**os.environ, "GPU_CHECK_GRACE": "6"})
    elapsed = time.monotonic() - start
    assert res.returncode == 124, (res.returncode, log.read_text())
    assert elapsed < 14 + 3, f"the phase ran {elapsed:.0f} s past its 14 s cap"
    root = ET.parse(xml).getroot()  # written: pytest ended its session on SIGINT
    suite = root if root.tag == "testsuite" else root[0]
    assert int(suite.get("tests")) >= 1 and int(suite.get("failures")) == 0
    assert "test_first PASSED" in log.read_text()
    text = gpu_check_summary.summary(str(tmp_path))
    assert "stopped at its cap: running" in text and "test_phase.py::test_hangs" in text, text
    assert "0 failed" in text, text


def write(folder, name, text):
    with open(os.path.join(folder, name), "w") as f:
        f.write(text)


GOOD_XML = ('<testsuites><testsuite tests="3" failures="1" errors="0" skipped="1">'
            '<testcase name="test_a" time="1.5"/>'
            '<testcase name="test_b" time="2"><failure message="AssertionError: ranks differ"/></testcase>'
            '<testcase name="test_c"><skipped message="needs two GPUs"/></testcase>'
            '</testsuite></testsuites>')

# Each state a run can stop in, and a line its summary must hold.
STATES = {
    "nothing at all": ({}, "(no phase ran: .phases is missing)"),
    "only the phase list": ({".phases": "[0 s] probe\n"}, "probe: no probe.log"),
    "probe only": ({".phases": "[0 s] probe\n[3 s] probe exit 0\n",
                    "probe.log": "torch 2.11.0+cu130 cuda 13.0 available True\nnoise\n"
                                 "cuda ipc between processes: works (2.1 s)\n"},
                   "cuda ipc between processes: works (2.1 s)"),
    "build failed": ({".phases": "[5 s] module exit 1\nerror: nvcc died\n"}, "error: nvcc died"),
    "tests log without its xml": ({"tests.log": "tests/python/test_cuda.py::test_x \n"},
                                  "no tests.xml (see tests.log)"),
    "xml cut short": ({"tests.xml": GOOD_XML[:70], "tests.log": ""}, "is not readable XML"),
    "a full xml": ({"tests.xml": GOOD_XML, "tests.log": "== 1 failed, 1 passed, 1 skipped =="},
                   "FAILURE test_b (2 s): AssertionError: ranks differ"),
    "skips grouped by reason": ({"tests.xml": GOOD_XML}, "SKIPPED 1: needs two GPUs (test_c)"),
    "an empty benchmark log": ({"bench_procs_4.log": ""}, "-- bench_procs_4.log (empty)"),
    "a benchmark log": ({"bench_threads.log": "a\nb\nc\nd\ne\nlast row\n"}, "last row"),
    "no smoke phase": ({".phases": "[0 s] probe\n"}, "smoke: not run"),
    "a smoke phase": ({"smoke.log": "noise\n[processes: FAILED in 3.0 s]\nsmoke: FAILED: processes\n"},
                      "  smoke: FAILED: processes"),
    "a stress phase": ({"stress.log": "ordering stress, world 2: 300 calls per rank, 600 ring "
                                      "kernels, slots 2 x 256 B, 4.0 s: ok\n"},
                       "  ordering stress, world 2: 300 calls per rank"),
}


@pytest.mark.parametrize("state", sorted(STATES))
def test_the_summary_comes_out_of_every_partial_state(tmp_path, state):
    files, must_hold = STATES[state]
    for name, text in files.items():
        write(tmp_path, name, text)
    res = subprocess.run([sys.executable, os.path.join(SCRIPTS, "gpu_check_summary.py"),
                          str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert must_hold in res.stdout, res.stdout
    assert (tmp_path / "summary.log").read_text() == res.stdout


def test_the_plan_with_the_prebuilt_module_fits_eight_minutes():
    res = subprocess.run(["bash", os.path.join(SCRIPTS, "gpu_check.sh"), "--plan"],
                         capture_output=True, text=True, timeout=30, env={
                             k: v for k, v in os.environ.items() if k != "GPU_CHECK_SECONDS"})
    assert res.returncode == 0, res.stderr
    plan = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    caps = [int(plan["probe"]), int(plan["module"].split()[0]), int(plan["smoke"]),
            int(plan["stress"]), int(plan["tests"]), int(plan["tests_more"]),
            int(plan["tests_alias"]), int(plan["tests_threads"])]
    bench_each, times = (int(x) for x in plan["bench"].split(" x "))
    total = sum(caps) + bench_each * times
    assert total == int(plan["total_prebuilt"])
    assert total <= 8 * 60, plan
    assert int(plan["deadline"]) <= 8 * 60, plan


def _which_module(prebuilt):
    res = subprocess.run(["bash", os.path.join(SCRIPTS, "gpu_check.sh"), "--which-module"],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "GPU_PREBUILT": str(prebuilt)})
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_a_prebuilt_module_of_other_sources_is_not_used(tmp_path):
    """The module carried to the GPU machine is used only when it was built for its Python and
    torch from this tree's sources: a stale build/gpu-prebuilt would test old code silently."""
    import platform

    import torch
    stamp = subprocess.run(["bash", os.path.join(SCRIPTS, "source_stamp.sh")],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert len(stamp) == 16, stamp
    python = ".".join(platform.python_version_tuple()[:2])
    (tmp_path / "_C.cpython-fake.so").write_bytes(b"")
    info = tmp_path / "BUILD_INFO"
    info.write_text(f"python {python}\ntorch {torch.__version__}\nsources {stamp}\n")
    assert _which_module(tmp_path).startswith("prebuilt"), _which_module(tmp_path)
    info.write_text(f"python {python}\ntorch {torch.__version__}\nsources 0123456789abcdef\n")
    assert _which_module(tmp_path).startswith("build:"), _which_module(tmp_path)
    info.write_text(f"python {python}\ntorch {torch.__version__}\n")  # an unstamped module
    assert _which_module(tmp_path).startswith("build:"), _which_module(tmp_path)


def test_the_stamp_follows_the_sources(tmp_path):
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    (tree / "csrc").mkdir()
    subprocess.run(["cp", os.path.join(SCRIPTS, "source_stamp.sh"), str(tree / "scripts")],
                   check=True)
    (tree / "CMakeLists.txt").write_text("project(x)\n")
    (tree / "csrc" / "a.cc").write_text("int a;\n")
    stamp = lambda: subprocess.run(["bash", str(tree / "scripts" / "source_stamp.sh")],  # noqa: E731
                                   capture_output=True, text=True, check=True).stdout
    first = stamp()
    assert stamp() == first
    (tree / "csrc" / "a.cc").write_text("int b;\n")
    assert stamp() != first


def test_benchmarks_settle_cuda_in_few_calls():
    from torch_ring_backend.bench.measure import SETTLE_CALLS, settle_calls
    assert settle_calls("cpu") == SETTLE_CALLS == 1000
    # Four processes time-slicing one GPU pay up to a slice per hop: 1000 calls would use the
    # benchmark phase's whole cap.
    assert settle_calls("cuda") <= 50 and settle_calls("cuda:0") == settle_calls("cuda")


def test_what_comes_back_is_at_most_eight_files_with_the_failing_log_whole(tmp_path):
    """The GPU machine hands back at most 8 files from $OUT: the check's 13+ logs are gathered
    into 7 named files and one archive, and the log of a failing test phase is among the
    named ones, whole, whichever phase it was."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    every = {".phases": "[0 s] probe\n[3 s] probe exit 0\n", "probe.log": "nvcc: 13.0\n",
             "build.log": "".join(f"build line {i}\n" for i in range(200)),
             "smoke.log": "smoke: all_reduce 4 KiB ok\n", "stress.log": "stress: 300 calls\n",
             "tests.log": "test_cuda.py::test_a PASSED [ 50%]\n== 2 passed in 3.0s ==\n",
             "tests.xml": GOOD_XML, "tests_more.xml": GOOD_XML, "tests_threads.xml": GOOD_XML,
             "tests_more.log": "test_cuda.py::test_three_ranks FAILED [100%]\n"
                               "Traceback: ranks differ at element 7\n== 1 failed in 9.0s ==\n",
             "tests_threads.log": "test_cuda.py::test_threads_as_ranks PASSED\n",  # cut at its cap
             "bench_threads.log": "row\n", "bench_procs_2.log": "row\n",
             "bench_procs_4.log": "row\n", "summary.log": "summary\n"}
    for name, text in every.items():
        write(logs, name, text)
    res = subprocess.run(["bash", os.path.join(SCRIPTS, "gpu_check_gather.sh"), str(logs), str(out)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    back = sorted(os.listdir(out))
    assert len(back) <= 8, back
    assert back == sorted(["summary.log", "phases.log", "probe.log", "build_tail.log",
                           "smoke.log", "stress.log", "failed_tests.log", "all_logs.tar.gz"]), back
    failed = (out / "failed_tests.log").read_text()
    assert "Traceback: ranks differ at element 7" in failed
    assert "======== tests_threads.log" in failed  # no summary line: stopped at its cap
    assert "======== tests.log" not in failed  # passed
    assert (out / "build_tail.log").read_text().splitlines() == [f"build line {i}"
                                                                  for i in range(120, 200)]
    import tarfile
    with tarfile.open(out / "all_logs.tar.gz") as tar:
        names = {os.path.basename(n) for n in tar.getnames()}
    assert set(every) <= names, set(every) - names
