#!/usr/bin/env python3
"""Runs PyTorch's distributed test suite against "ring" (ring_suite.py) and checks every outcome
against expectations.py: a test that fails but is not listed, or is listed but passes, fails
the run. Prints how many of the suite's tests ran, passed, failed as expected, and were skipped
(with each reason and its count).

    python3 tests/torch_suite/run_suite.py                 # CPU tests, world 3
    python3 tests/torch_suite/run_suite.py --world 8 --only test_barrier_group ...
    python3 tests/torch_suite/run_suite.py -k all_gather   # a regex over test names

Tests whose decorators would only exit in every spawned rank (skip_if_small_worldsize at world
3, skip_if_no_gpu without a GPU) are counted as skipped without spawning: the suite itself
decides that from the same decorators, after starting WORLD_SIZE processes for nothing.
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
    p.add_argument("--spawn-all", action="store_true",
                   help="start even the tests whose decorators skip them (checks that shortcut)")
    return p.parse_args(argv)


def runtime_skip(fn, has_gpu, world, reasons):
    """The reason torch's own decorators on `fn` would exit every rank with a skip, or None."""
    seen = set()
    while fn is not None and id(fn) not in seen:
        seen.add(id(fn))
        code = getattr(fn, "__code__", None)
        consts = [c for c in (code.co_consts if code else ()) if isinstance(c, str)]
        for key, why in reasons.items():
            hit = any(key in c for c in consts)
            if not hit:
                continue
            if key == "small_worldsize" and world >= 8:
                continue
            if key == "odd_worldsize" and world % 2 == 0:
                continue
            if key in ("no_cuda", "multi-gpu") and has_gpu:
                continue
            return why
        fn = getattr(fn, "__wrapped__", None)
    return None


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
    pre_skipped = []
    for name in names:
        why = runtime_skip(getattr(cls, name), has_gpu, args.world, expectations.RUNTIME_SKIPS)
        if why and name not in expectations.LIFTED and not args.spawn_all:
            pre_skipped.append({"name": name, "status": "skipped", "detail": why, "seconds": 0})
        else:
            suite.addTest(cls(name))
    print(f"run_suite: {len(names)} tests of torch {torch.__version__}'s DistributedTest on "
          f"'ring', world {args.world}; {len(pre_skipped)} skipped by their decorators without "
          f"spawning, {suite.countTestCases()} to start")
    start = time.monotonic()
    suite.run(result)
    rows = result.rows + pre_skipped

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
