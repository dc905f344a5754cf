"""scripts/latency_floor.py as a test, so that a mutant can be run against it
(tests/mutation/mutate.py: small_calls_never_run_here). Not in the pytest suite (testpaths is
tests/python): CI runs the script itself, after the suites."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_latency_floor():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "latency_floor.py")],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
