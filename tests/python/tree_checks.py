"""For the tests of the tree's own checks (scripts/check_paths.py, check_comment_figures.py): a
small git repository made in a test's folder, and one of the checks run on it."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_check(script, root):
    """scripts/<script> run with --root `root`: its CompletedProcess (text output)."""
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", script), "--root",
                           str(root)], capture_output=True, text=True)


def make_repo(tmp_path, files):
    """A git repository in `tmp_path` tracking `files` ({path: text})."""
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    return tmp_path
