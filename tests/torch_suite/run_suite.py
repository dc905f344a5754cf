#!/usr/bin/env python3
"""Runs PyTorch's distributed test suite against "ring" (ring_suite.py) and checks every outcome
against expectations.py: a test that fails but is not listed, or is listed but passes, fails
the run. Prints how many of the suite's tests ran, passed, failed as expected, and were skipped
(with each reason and its count).

    python3 tests/torch_suite/run_suite.py                 # CPU tests, world 3
    python3 tests/torch_suite/run_suite.py --world 8 --only test_barrier_group ...
    python3 tests/torch_suite/run_suite.py -k all_gather   # a regex over test names

The CI run is `run_suite.py --ci`: every CPU test at world 3, then expectations.WORLD_8 at
world 8 (tests torch skips below 8 ranks), each pass in its own process.
"""
import argparse
import collections
import json
import os
import re
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=3, help="WORLD_SIZE (default 3)")
    p.add_argument("-k", dest="pattern", default=None, help="regex over test names")
    p.add_argument("--only", nargs="*", default=None, help="exactly these tests")
    p.add_argument("--json", default=None, help="write every outcome to this file")
    p.add_argument("--no-check", action="store_true",
                   help="report only; do not compare with expectations.py")
    p.add_argument("--ci", action="store_true",
                   help="world 3 (every CPU test), then expectations.WORLD_8 at world 8")
    return p.parse_args(argv)


class Outcomes(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.rows = []
        self._start = None

    def startTest(self, test):
        super().startTest(test)
        self._start = time.monotonic()
        print(f"  {test._testMethodName} ...", end="", flush=True)

    def _row(self, test, status, detail=""):
        seconds = time.monotonic() - self._start if self._start else 0.0
        self.rows.append({"name": test._testMethodName, "status": status, "detail": detail,
                          "seconds": round(seconds, 1)})
        print(f" {status} ({seconds:.1f} s){': ' + detail.splitlines()[0][:100] if detail and status != 'failed' else ''}",
              flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._row(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._row(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._row(test, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._row(test, "skipped", str(reason))


def main(argv=None):
    args = parse_args(argv)
    if args.ci:
        # Each world in a process of its own: the suite reads WORLD_SIZE when it is imported.
        import subprocess
        sys.path.insert(0, HERE)
        import expectations
        code = subprocess.call([sys.executable, __file__, "--world", "3"])
        code8 = subprocess.call([sys.executable, __file__, "--world", "8", "--only",
                                 *expectations.WORLD_8])
        return code or code8
    os.environ["WORLD_SIZE"] = str(args.world)
    os.environ["BACKEND"] = "ring"
    sys.path.insert(0, HERE)
    # The ranks are spawned: they import ring_suite by this name from this folder.
    os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
    import torch

    import expectations
    import ring_suite

    has_gpu = torch.cuda.is_available()
    cls = ring_suite.TestRingBackend
    names = unittest.TestLoader().getTestCaseNames(cls)
    if not has_gpu:
        names = [n for n in names if not re.search(r"cuda|nccl", n)]
    if args.only is not None:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            print(f"run_suite: no such (CPU) tests: {unknown}", file=sys.stderr)
            return 2
        names = [n for n in names if n in args.only]
    if args.pattern:
        names = [n for n in names if re.search(args.pattern, n)]

    result = Outcomes()
    suite = unittest.TestSuite()
    for name in names:
        suite.addTest(cls(name))
    print(f"run_suite: {len(names)} tests of torch {torch.__version__}'s DistributedTest on "
          f"'ring', world {args.world}")
    start = time.monotonic()
    suite.run(result)
    rows = result.rows

    counts = collections.Counter(r["status"] for r in rows)
    skips = collections.Counter(r["detail"].splitlines()[0][:110] for r in rows
                                if r["status"] == "skipped")
    unexpected, fixed = [], []
    for r in rows:
        expected = expectations.EXPECTED_FAILURES.get(r["name"])
        if r["status"] == "failed" and expected is None:
            unexpected.append(r)
        elif r["status"] == "failed":
            r["status"] = "expected failure"
        elif r["status"] == "passed" and expected is not None:
            fixed.append(r)
    counts = collections.Counter(r["status"] for r in rows)
    print(f"\nrun_suite: {len(rows)} tests in {time.monotonic() - start:.0f} s: "
          f"{counts['passed']} passed, {counts['expected failure']} failed as expected, "
          f"{counts['failed']} failed, {counts['skipped']} skipped "
          f"(of them {sum(1 for r in rows if r['name'] in expectations.LIFTED)} run with a "
          f"lifted name gate)")
    for why, n in skips.most_common():
        print(f"  skipped {n:3d}: {why}")
    for r in unexpected:
        print(f"\nUNEXPECTED FAILURE {r['name']}:\n{r['detail'][-3000:]}")
    for r in fixed:
        print(f"\nPASSED BUT EXPECTED TO FAIL {r['name']}: remove it from expectations.py "
              f"({expectations.EXPECTED_FAILURES[r['name']]})")
    stale = ring_suite.lifted_but_not_gated()
    if stale:
        print(f"\nLIFTED but no longer gated in this torch: {stale}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.no_check:
        return 0
    return 1 if unexpected or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
