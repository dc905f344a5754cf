"""One screen from whatever scripts/gpu_check.sh left in its folder, however far it got.

    python scripts/gpu_check_summary.py OUT_DIR

Why a file of its own: the summary is what the closing note quotes from a 15-minute GPU lease,
so it must come out of every partial state (no probe, a build that failed, a test phase stopped
at its cap with or without its XML, an empty benchmark log) and say what is missing rather than
fail. tests/python/test_gpu_check.py feeds it each of those states. Never exits non-zero.
"""
import datetime
import os
import re
import sys
import xml.etree.ElementTree as ET

PROBE_KEYS = ("torch", "python", "device", "nccl", "python headers", "/dev/shm", "compute mode",
              "cuda ipc", "cpu shared memory", "nvcc", "module")
TEST_PHASES = (("tests", "tests.xml", "tests.log"),
               ("tests, more ranks", "tests_more.xml", "tests_more.log"),
               ("tests, aliases and a device factor", "tests_alias.xml", "tests_alias.log"),
               ("tests, threads as ranks", "tests_threads.xml", "tests_threads.log"))
RESULT_WORDS = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def test_counts(xml_path):
    """Lines for one JUnit file, or None if it is absent; a file that does not parse says so."""
    text = read(xml_path)
    if text is None:
        return None
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        return [f"  {os.path.basename(xml_path)} is not readable XML ({e}): see the log"]
    suites = [root] if root.tag == "testsuite" else list(root)
    counts = {k: sum(int(s.get(k, 0) or 0) for s in suites)
              for k in ("tests", "failures", "errors", "skipped")}
    lines = ["  {tests} run, {failures} failed, {errors} errors, {skipped} skipped".format(**counts)]
    skipped = {}
    for case in root.iter("testcase"):
        name = case.get("name") or "(unnamed: the test the cap interrupted)"
        for kind in ("failure", "error"):
            el = case.find(kind)
            if el is not None:
                msg = (el.get("message") or el.text or "").strip().splitlines()
                lines.append(f"  {kind.upper():7} {name} ({float(case.get('time', 0) or 0):.0f} s): "
                             f"{(msg[0] if msg else '')[:150]}")
        el = case.find("skipped")
        if el is not None:
            skipped.setdefault((el.get("message") or "").strip()[:150], []).append(name)
    for reason, names in skipped.items():
        more = ", ..." if len(names) > 3 else ""
        lines.append(f"  SKIPPED {len(names)}: {reason} ({', '.join(names[:3])}{more})")
    return lines


def interrupted_test(log_text):
    """The test pytest -v had started but not finished when the log ends, if any."""
    last = None
    for line in log_text.splitlines():
        m = re.match(r"^(\S+\.py::\S+)(.*)$", line)
        if m:
            last = None if any(w in m.group(2) for w in RESULT_WORDS) else m.group(1)
    return last


def summary(out):
    lines = [f"== gpu_check summary ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M:%SZ})"]
    phases = read(os.path.join(out, ".phases"))
    lines += phases.rstrip().splitlines() if phases else ["(no phase ran: .phases is missing)"]
    probe = read(os.path.join(out, "probe.log"))
    if probe is None:
        lines.append("probe: no probe.log")
    else:
        lines += [ln for ln in probe.splitlines() if ln.startswith(PROBE_KEYS)][:12]
    # The smoke and ordering-stress phases: their own result lines, whole (a screen at most).
    for label, name, keep in (("smoke", "smoke.log", ("smoke", "[", "  ", "2 processes",
                                                     "resource use", "ordering stress")),
                              ("ordering stress", "stress.log", ("ordering stress", "  "))):
        text = read(os.path.join(out, name))
        if text is None:
            lines.append(f"{label}: not run")
            continue
        kept = [ln for ln in text.splitlines() if ln.startswith(keep)]
        lines.append(f"{label}:" + ("" if kept else f" {name} holds no result line"))
        lines += [f"  {ln}" for ln in kept[:30]]
    for label, xml_name, log_name in TEST_PHASES:
        log = read(os.path.join(out, log_name))
        counts = test_counts(os.path.join(out, xml_name))
        if counts is None and log is None:
            lines.append(f"{label}: not run")
            continue
        lines.append(f"{label}:")
        lines += counts if counts is not None else [f"  no {xml_name} (see {log_name})"]
        if log is not None:
            stuck = interrupted_test(log)
            if stuck or "stopped at its cap" in log:
                lines.append(f"  stopped at its cap{': running ' + stuck if stuck else ''}")
    for name in sorted(os.listdir(out)) if os.path.isdir(out) else []:
        if not (name.startswith("bench_") and name.endswith(".log")):
            continue
        rows = [ln for ln in (read(os.path.join(out, name)) or "").splitlines() if ln.strip()]
        lines.append(f"-- {name} ({'last rows' if rows else 'empty'})")
        lines += rows[-4:]
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 2:
        print("usage: gpu_check_summary.py OUT_DIR", file=sys.stderr)
        return 2
    text = summary(argv[1])
    try:
        with open(os.path.join(argv[1], "summary.log"), "w") as f:
            f.write(text)
    except OSError as e:
        text += f"(summary.log not written: {e})\n"
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
