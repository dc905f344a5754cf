#!/usr/bin/env python3
"""Every file of this repository that README.md, docs/ or a source file names exists.

Why: a renamed or deleted file leaves its old path in comments and pages, and a newcomer who
follows it finds nothing (tests once cited the deleted executor/mailbox_collectives.h). The
check reads every tracked text file for tokens shaped like a path of this tree with a file
extension (csrc/transport/link.h, docs/scale.md) and resolves each as it is meant: from the
root, from csrc/ (the sources name their own files that way: transport/link.h), from tests/
(cpp/test_x.cc), or from the naming file's own folder. A token whose first folder is none of
these (torch/csrc/..., another project's paths) is not this tree's and is skipped, as are
build outputs (build/...), absolute paths and patterns (a '*' or '<' in them).

    python3 scripts/check_paths.py [--root DIR]     exit 1, with each missing path and where
                                                    it is named, if any is missing
"""
import argparse
import os
import re
import subprocess
import sys

EXTENSIONS = ("h", "cc", "cu", "cuh", "py", "sh", "md", "cmake", "txt", "json", "toml", "cfg", "png")
# This tree's own top folders (a path into one of them is ours even where the folder is gone).
TOP_FOLDERS = {".ci", "cmake", "csrc", "docs", "scripts", "tests", "torch_ring_backend"}
# The checker and its test name made-up paths on purpose (a deleted file, a tree built in a test),
# as does the test of check_comment_figures.py (the sources of the tree it builds).
NOT_READ = {"scripts/check_paths.py", "tests/python/test_check_paths.py",
            "tests/python/test_check_comment_figures.py"}
TEXT_FILES = (".md", ".h", ".cc", ".cu", ".cuh", ".py", ".sh", ".cmake", ".txt", ".toml", ".cfg")
# A path token: folders and a file name with one of the extensions, not part of a longer word
# or path (so the tail of /usr/src/x.h or of a URL is not taken for one of ours).
TOKEN = re.compile(r"(?<![\w./:-])((?:\.ci|[A-Za-z_][\w-]*)/[\w./-]*[\w-]\.(?:%s))(?![\w/])"
                   % "|".join(EXTENSIONS))


def tracked(root):
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                         check=True).stdout
    return [f for f in out.splitlines()
            if (f.endswith(TEXT_FILES) or f == ".ci/run") and f not in NOT_READ]


def candidates(root, naming_file, token):
    """The places `token`, named in `naming_file`, may mean; empty if it is not this tree's."""
    first = token.split("/")[0]
    top = TOP_FOLDERS | ({d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))} -
                         {"build", ".git"})
    here = os.path.dirname(naming_file)
    places = [os.path.join(here, token)] if here else []
    if first in top:
        return [token] + places
    if os.path.isdir(os.path.join(root, "csrc", first)):
        return [os.path.join("csrc", token)] + places
    if os.path.isdir(os.path.join(root, "tests", first)):
        return [os.path.join("tests", token)] + places
    if here and os.path.isdir(os.path.join(root, here, first)):
        return places
    return []


def missing_paths(root):
    """{path: [file:line, ...]} for every named path that resolves to no file."""
    missing = {}
    for name in tracked(root):
        with open(os.path.join(root, name), errors="replace") as f:
            text = f.read()
        for m in TOKEN.finditer(text):
            token = m.group(1)
            places = candidates(root, name, token)
            if places and not any(os.path.exists(os.path.join(root, p)) for p in places):
                line = text.count("\n", 0, m.start()) + 1
                missing.setdefault(token, []).append(f"{name}:{line}")
    return missing


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = p.parse_args()
    missing = missing_paths(args.root)
    for token, where in sorted(missing.items()):
        print(f"check_paths: {token} does not exist; named in {', '.join(where)}")
    count = len(tracked(args.root))
    print(f"check_paths: {count} files read, {len(missing)} named path(s) missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
