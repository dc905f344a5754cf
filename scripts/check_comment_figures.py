#!/usr/bin/env python3
"""No comment in csrc/ states a measured figure: measurements live in docs/, dated, with their
machine (docs/notes/code_comment_figures.md holds the ones the comments once carried).

Why: a figure in a comment ages where nobody looks to update it (straggler_stats.h's "22,500
instructions" disagreed with the docs for months), and this project's machines differ from run to
run (docs/notes/benchmarks_by_machine.md). Design parameters stay: "a 500 us spin", "250 ms
heartbeats", "at 2 GB/s" in a formula are choices, not measurements.

What counts as a measured figure, in one sentence of a comment (consecutive // lines are read as
one text, cut into sentences):
  - a comparison by a number: "40% faster", "3x slower", "2.5 times faster";
  - a number with a unit of time, rate or work (ns, us, ms, GB/s, MB/s, instructions, cycles)
    beside a word that reports a measurement: measured, took, ran, timed, clocked.
Block comments (/* */) are not read: csrc/ writes its comments with //, and /* */ only names
arguments (/*timed=*/true). The check is a heuristic over those shapes, not a reader of intent: a figure phrased otherwise
passes it. A sentence it flags is reworded (the reason stays, the figure goes to docs/), not
exempted: there is no allowlist.

    python3 scripts/check_comment_figures.py [--root DIR]   exit 1, naming file:line and the
                                                            sentence, for each figure found
"""
import argparse
import os
import re
import subprocess
import sys

SOURCES = (".h", ".cc", ".cu", ".cuh")
NUMBER = r"(?<![\w.])\d[\d,]*(?:\.\d+)?"
COMPARISON = re.compile(NUMBER + r"\s?(?:%|x|times)\s+(?:faster|slower)\b", re.I)
QUANTITY = re.compile(NUMBER + r"\s?(?:ns|us|µs|ms|GB/s|MB/s|GiB/s|MiB/s|Gbit/s|Gb/s|"
                      r"instructions|cycles)(?![\w/])")
REPORTED = re.compile(r"\b(?:measured|took|ran|timed|clocked)\b", re.I)



def tracked_sources(root):
    out = subprocess.run(["git", "ls-files", "csrc"], cwd=root, capture_output=True, text=True,
                         check=True).stdout
    return [f for f in out.splitlines() if f.endswith(SOURCES)]


def line_comment(line):
    """The text after the line's comment mark, or None: the first // outside a string literal
    (quotes counted, an escaped quote or a '"' character skipped)."""
    quotes = 0
    i = 0
    while i < len(line):
        if line.startswith(("\\\"", "'\"'"), i):
            i += 3 if line[i] == "'" else 2
            continue
        if line[i] == '"':
            quotes += 1
        elif line.startswith("//", i) and quotes % 2 == 0:
            return i, line[i:].lstrip("/").strip()
        i += 1
    return None


def comment_texts(text):
    """Each run of consecutive // comment lines: its text joined, and where each line starts in
    it ([(offset, line number)])."""
    runs = []
    last = -2
    for number, line in enumerate(text.split("\n"), 1):
        found = line_comment(line)
        if found is None:
            continue
        start, part = found
        # Only whole-line comments continue each other; one after code stands alone.
        whole = not line[:start].strip()
        if not whole:
            runs.append([part, [(0, number)]])
            last = -2
            continue
        if number == last + 1:
            runs[-1][1].append((len(runs[-1][0]) + 1, number))
            runs[-1][0] += " " + part
        else:
            runs.append([part, [(0, number)]])
        last = number
    return runs


def figures(text):
    """(line, sentence) of each measured figure in the comments of one source's `text`."""
    found = []
    for comment, starts in comment_texts(text):
        # Sentences end at a '.' or ';' before a space or the end ("1.5 ms" and "x.md" stay).
        for m in re.finditer(r"(?:[^.;]|[.;](?!\s|$))+(?:[.;]+|$)", comment):
            sentence = m.group(0).strip()
            if COMPARISON.search(sentence) or (QUANTITY.search(sentence) and
                                               REPORTED.search(sentence)):
                # The line of the figure itself, not of the sentence's start.
                figure = (COMPARISON.search(sentence) or QUANTITY.search(sentence)).start()
                at = m.start() + (len(m.group(0)) - len(m.group(0).lstrip())) + figure
                line = max(n for offset, n in starts if offset <= at)
                found.append((line, sentence))
    return found


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    a = p.parse_args(argv)
    bad = []
    files = tracked_sources(a.root)
    for name in files:
        if not os.path.exists(os.path.join(a.root, name)):
            continue  # tracked, deleted in the working tree: nothing to read
        with open(os.path.join(a.root, name), encoding="utf-8", errors="replace") as f:
            for line, sentence in figures(f.read()):
                bad.append(f"{name}:{line}: a measured figure in a comment: {sentence[:200]}")
    for b in bad:
        print(b)
    print(f"check_comment_figures: {len(files)} source files read, {len(bad)} figure(s) in "
          "comments" + ("; move each to docs/ (docs/notes/code_comment_figures.md) and keep the "
                        "reason" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
