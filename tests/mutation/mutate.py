#!/usr/bin/env python3
"""Hand-picked mutants of the source, each built incrementally and run against the tests that
should catch it. A mutant is KILLED when those tests fail (or time out), SURVIVED when they pass:
a surviving mutant is a hole in the tests.

    python3 tests/mutation/mutate.py            # every mutant (by hand: about half an hour)
    python3 tests/mutation/mutate.py --quick    # the CI subset (C++ and TSan, a few minutes)
    python3 tests/mutation/mutate.py --only avg_as_multiply

By default the mutants go into a scratch copy, build/mutation/tree, with build folders of its
own: the working tree is never modified. `--in-place` (what CI uses on its throwaway clone)
mutates the checkout itself and reuses the build folders scripts/test.sh has just built, so only
what a mutant touches recompiles; it refuses a checkout with uncommitted changes and restores
every file it changed. Before any mutant, each chosen test command must pass on the unmutated
tree, or a "kill" would mean nothing. Exit code 0 only if every mutant was killed.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mutants import MUTANTS, Mutant  # noqa: E402,F401  (the list: mutants.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRATCH = os.path.join(ROOT, "build", "mutation")

# Where the tree and its build folders are: set by main() (scratch copy or in place).
TREE = CPP_BUILD = TSAN_BUILD = EXT_BUILD = EMU_BUILD = A64_BUILD = ""
# The root of the aarch64 cross build's libraries, where qemu-user finds the loader.
A64_SYSROOT = "/usr/aarch64-linux-gnu"


# The end of the output of the last command that failed, for a failure on the unmutated tree
# (a mutant's failing tests are its expected outcome; the unmutated tree's need a diagnosis).
LAST_FAILURE_TAIL = ""


def run(cmd, timeout=None, env=None):
    global LAST_FAILURE_TAIL
    try:
        done = subprocess.run(cmd, cwd=TREE, timeout=timeout, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    except subprocess.TimeoutExpired as e:
        LAST_FAILURE_TAIL = (e.stdout or b"")[-4000:].decode(errors="replace")
        return "timeout"
    if done.returncode != 0:
        LAST_FAILURE_TAIL = done.stdout[-4000:].decode(errors="replace")
    return done.returncode


EXCLUDED = {"build", ".git", "__pycache__", ".pytest_cache"}


def _built_here(name):
    return name.endswith(".so") or name == "_C.torch_version"


def sync_tree():
    """Copies into the scratch tree every file whose content differs (with a fresh mtime, so an
    incremental build never keeps an object compiled from a mutant) and drops files gone here."""
    seen = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in EXCLUDED]
        for name in files:
            if _built_here(name):
                continue
            rel = os.path.relpath(os.path.join(folder, name), ROOT)
            seen.add(rel)
            with open(os.path.join(ROOT, rel), "rb") as f:
                data = f.read()
            dest = os.path.join(TREE, rel)
            if os.path.exists(dest):
                with open(dest, "rb") as f:
                    if f.read() == data:
                        continue
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
            shutil.copymode(os.path.join(ROOT, rel), dest)
    for folder, dirs, files in os.walk(TREE):
        dirs[:] = [d for d in dirs if d not in EXCLUDED]
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), TREE)
            if rel not in seen and not _built_here(name):
                os.remove(os.path.join(TREE, rel))


def build(kind, binaries=()):
    """Configures if needed, then builds incrementally what `kind` needs. Returns an error or ""."""
    jobs = str(os.cpu_count() or 2)
    if kind == "cpp":
        if not os.path.exists(os.path.join(CPP_BUILD, "build.ninja")):
            subprocess.check_call(["cmake", "-S", TREE, "-B", CPP_BUILD, "-G", "Ninja",
                                   "-DRING_BUILD_EXTENSION=OFF", "-DRING_BUILD_TESTS=ON",
                                   "-DRING_CUDA=AUTO"], stdout=subprocess.DEVNULL)
        targets = [b for b in binaries if b != "ring_cuda_host_tests" or shutil.which("nvcc")]
        rc = run(["cmake", "--build", CPP_BUILD, "-j", jobs, "--target", *targets])
        return "" if rc == 0 else f"cmake --build {CPP_BUILD} --target {' '.join(targets)}: {rc}"
    if kind == "tsan":
        return ""  # scripts/tsan.sh builds, then runs
    if kind == "a64":
        if not shutil.which("aarch64-linux-gnu-g++") or not shutil.which("qemu-aarch64"):
            return "no aarch64 cross compiler or qemu-aarch64 (bash scripts/test_aarch64.sh installs them)"
        if not os.path.exists(os.path.join(A64_BUILD, "build.ninja")):
            subprocess.check_call(["cmake", "-S", TREE, "-B", A64_BUILD, "-G", "Ninja",
                                   "-DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake",
                                   "-DRING_BUILD_EXTENSION=OFF", "-DRING_BUILD_TESTS=ON",
                                   "-DRING_CUDA=OFF"], cwd=TREE, stdout=subprocess.DEVNULL)
        rc = run(["cmake", "--build", A64_BUILD, "-j", jobs, "--target", *binaries])
        return "" if rc == 0 else f"cmake --build {A64_BUILD} --target {' '.join(binaries)}: {rc}"
    if kind == "emu":
        rc = run(["bash", "scripts/test_cuda_emulated.sh", "--build-only"],
                 env=dict(os.environ, CUDA_EMULATED_BUILD_DIR=EMU_BUILD))
        return "" if rc == 0 else f"scripts/test_cuda_emulated.sh --build-only: {rc}"
    if kind == "py":
        if not os.path.exists(os.path.join(EXT_BUILD, "build.ninja")):
            subprocess.check_call(["cmake", "-S", TREE, "-B", EXT_BUILD, "-G", "Ninja",
                                   f"-DPython_EXECUTABLE={sys.executable}",
                                   "-DRING_BUILD_TESTS=OFF", "-DRING_CUDA=OFF"],
                                  stdout=subprocess.DEVNULL)
        rc = run(["cmake", "--build", EXT_BUILD, "--target", "_C", "-j", jobs])
        if rc != 0:
            return f"cmake --build {EXT_BUILD} --target _C: {rc}"
        pkg = os.path.join(TREE, "torch_ring_backend")
        for f in os.listdir(EXT_BUILD):
            if f.startswith("_C") and _built_here(f):
                shutil.copy2(os.path.join(EXT_BUILD, f), pkg)
        return ""
    raise ValueError(kind)


def test(m, timeout):
    """The failures of m's tests on the tree as it is now (an empty list: they all passed)."""
    if m.kind == "cpp":
        failed, matched = [], 0
        for binary in m.binaries:
            path = os.path.join(CPP_BUILD, binary)
            if binary == "ring_cuda_host_tests" and not os.path.exists(path):
                continue  # built only where nvcc exists
            listed = subprocess.run([path, f"--gtest_filter={m.tests}", "--gtest_list_tests"],
                                    capture_output=True, text=True).stdout
            if not any(line.startswith("  ") for line in listed.splitlines()):
                continue
            matched += 1
            rc = run([path, f"--gtest_filter={m.tests}"], timeout=timeout)
            if rc != 0:
                failed.append(f"{binary}: {rc}")
        if not matched:
            failed.append(f"no test of {m.binaries} matches {m.tests}")
        return failed
    if m.kind == "a64":
        # The aarch64 binaries under qemu-user, as scripts/test_aarch64.sh runs them.
        failed = []
        for binary in m.binaries:
            rc = run(["qemu-aarch64", "-L", A64_SYSROOT, os.path.join(A64_BUILD, binary),
                      f"--gtest_filter={m.tests}", "--gtest_death_test_style=threadsafe"],
                     timeout=timeout)
            if rc != 0:
                failed.append(f"{binary} under qemu-aarch64: {rc}")
        return failed
    if m.kind == "tsan":
        # The host kernels' binary only: tsan.sh's other two binaries (the emulated CUDA path
        # and the engine) test code no "tsan" mutant touches, and their timing-bound cases
        # are scripts/tsan.sh's own stage in CI.
        env = dict(os.environ, TSAN_BUILD_DIR=TSAN_BUILD, TSAN_FILTER=m.tests,
                   TSAN_EMULATED_FILTER="", TSAN_ENGINE_FILTER="")
        rc = run(["bash", "scripts/tsan.sh"], timeout=timeout, env=env)
        return [] if rc == 0 else [f"tsan: {rc}"]
    if m.kind == "emu":
        rc = run(["bash", "scripts/test_cuda_emulated.sh", *m.tests.split()], timeout=timeout,
                 env=dict(os.environ, CUDA_EMULATED_BUILD_DIR=EMU_BUILD))
        return [] if rc == 0 else [f"test_cuda_emulated.sh: {rc}"]
    env = dict(os.environ, PYTHONPATH=TREE)
    where = subprocess.run([sys.executable, "-c",
                            "import torch_ring_backend as t; print(t.__file__)"],
                           env=env, cwd=TREE, capture_output=True, text=True).stdout.strip()
    if not where.startswith(TREE):
        return [f"the tests import torch_ring_backend from {where!r}, not from {TREE}"]
    rc = run([sys.executable, "-m", "pytest", *m.tests.split()], timeout=timeout, env=env)
    return [] if rc == 0 else [f"pytest: {rc}"]


def _place(in_place):
    global TREE, CPP_BUILD, TSAN_BUILD, EXT_BUILD, EMU_BUILD, A64_BUILD
    if in_place:
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout
        if dirty:
            sys.exit(f"mutate: --in-place needs a checkout without changes; changed:\n{dirty}")
        TREE = ROOT
        CPP_BUILD = os.path.join(ROOT, "build", "cpp-tests")   # scripts/test.sh's
        TSAN_BUILD = os.path.join(ROOT, "build", "tsan")       # scripts/tsan.sh's
        EXT_BUILD = os.path.join(SCRATCH, "ext")
        EMU_BUILD = os.path.join(ROOT, "build", "cuda-emulated")  # test_cuda_emulated.sh's
        A64_BUILD = os.path.join(ROOT, "build", "aarch64")        # test_aarch64.sh's
    else:
        TREE = os.path.join(SCRATCH, "tree")
        CPP_BUILD = os.path.join(SCRATCH, "cpp")
        TSAN_BUILD = os.path.join(SCRATCH, "tsan")
        EXT_BUILD = os.path.join(SCRATCH, "ext")
        EMU_BUILD = os.path.join(SCRATCH, "emu")
        A64_BUILD = os.path.join(SCRATCH, "aarch64")
        os.makedirs(TREE, exist_ok=True)
        sync_tree()


def cpu_flags():
    """The CPU's flags as /proc/cpuinfo names them (empty where there is no such file)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the CI subset")
    p.add_argument("--only", nargs="*", help="these mutants")
    p.add_argument("--in-place", action="store_true",
                   help="mutate this checkout (clean) with scripts/test.sh's build folders")
    p.add_argument("--timeout", type=int, default=300, help="seconds per mutant's tests")
    args = p.parse_args(argv)
    chosen = [m for m in MUTANTS if (not args.quick or m.quick) and
              (not args.only or m.name in args.only)]
    if not chosen:
        sys.exit("mutate: no mutant chosen")
    # Mutants of code this CPU never runs cannot be killed here: named, and left out.
    flags = cpu_flags()
    missing = {m.name: [f for f in m.needs if f not in flags] for m in chosen}
    not_here = [m for m in chosen if missing[m.name]]
    for m in not_here:
        print(f"NOT HERE {m.name:32} this CPU lacks {', '.join(missing[m.name])}", flush=True)
    chosen = [m for m in chosen if not missing[m.name]]
    if not chosen:
        print("mutate: every chosen mutant needs what this CPU lacks")
        return 0
    _place(args.in_place)
    # A SIGTERM (a CI time limit) must still restore the mutated file: make it an exception.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("mutate: terminated"))

    start = time.monotonic()
    for kind in sorted({m.kind for m in chosen}):
        binaries = sorted({b for m in chosen if m.kind == kind for b in m.binaries})
        err = build(kind, binaries)
        if err:
            print(f"mutate: the unmutated tree does not build: {err}")
            return 2
    for m in chosen:
        failed = test(m, args.timeout)
        if failed:
            print(f"mutate: the tests of {m.name} fail on the unmutated tree: {failed}; the end "
                  f"of the failing command's output:\n{LAST_FAILURE_TAIL}")
            return 2
    print(f"mutate: the unmutated tree builds and passes every chosen test "
          f"({time.monotonic() - start:.0f} s)", flush=True)

    results = []
    for m in chosen:
        path = os.path.join(TREE, m.path)
        with open(path) as f:
            original = f.read()
        if original.count(m.find) != 1:
            print(f"mutate: {m.name}: the text to change occurs {original.count(m.find)} times "
                  f"in {m.path}")
            return 2
        began = time.monotonic()
        try:
            with open(path, "w") as f:
                f.write(original.replace(m.find, m.replace))
            # A mutant that does not compile tells nothing about the tests: it is an error of
            # this list, not a kill.
            err = build(m.kind, m.binaries)
            if err:
                print(f"mutate: {m.name} does not build ({err}): fix the mutant")
                return 2
            failed = test(m, min(args.timeout, m.timeout or args.timeout))
        finally:
            with open(path, "w") as f:
                f.write(original)
        verdict = "KILLED" if failed else "SURVIVED"
        results.append((m, verdict))
        detail = f"  [{'; '.join(failed)}]" if failed else ""
        print(f"{verdict:8} {m.name:32} {time.monotonic() - began:4.0f} s  {m.why}{detail}",
              flush=True)
    survived = [m.name for m, v in results if v == "SURVIVED"]
    print(f"mutate: {len(results) - len(survived)} of {len(results)} mutants killed in "
          f"{time.monotonic() - start:.0f} s" + (f"; SURVIVED: {survived}" if survived else "")
          + (f"; {len(not_here)} not run (this CPU lacks what they need)" if not_here else ""))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
