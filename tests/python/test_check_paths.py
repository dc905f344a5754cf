"""scripts/check_paths.py: every file of this tree that README, docs/ or a source names exists.
Checked on a small repository made here (a path that resolves, one that does not, in each of the
ways the tree names its files) and on this tree itself."""
import os

from tree_checks import ROOT, make_repo, run_check


def test_a_named_file_that_is_gone_is_reported_with_where_it_is_named(tmp_path):
    root = make_repo(tmp_path, {
        "csrc/transport/link.h": "// see transport/wait.h and executor/gone_rounds.h\n",
        "csrc/transport/wait.h": "",
        "csrc/executor/x.cc": "",
        "docs/a.md": "Read docs/b.md, csrc/transport/link.h and scripts/old_bench.py.\n"
                     "torch/csrc/distributed/c10d/Backend.py is torch's; /usr/include/x.h too.\n",
        "docs/b.md": "",
        "tests/cpp/CMakeLists.txt": "add(cases/test_here.cc)\n",
        "tests/cpp/cases/test_here.cc": "",
    })
    done = run_check("check_paths.py", root)
    assert done.returncode == 1, done.stdout
    assert "executor/gone_rounds.h does not exist; named in csrc/transport/link.h:1" in done.stdout
    assert "scripts/old_bench.py does not exist; named in docs/a.md:1" in done.stdout
    assert "2 named path(s) missing" in done.stdout, done.stdout


def test_every_path_this_tree_names_exists():
    done = run_check("check_paths.py", ROOT)
    assert done.returncode == 0, done.stdout


def test_every_script_is_listed_in_the_scripts_readme():
    with open(os.path.join(ROOT, "scripts", "README.md")) as f:
        listed = f.read()
    scripts = sorted(n for n in os.listdir(os.path.join(ROOT, "scripts"))
                     if n.endswith((".py", ".sh")))
    unlisted = [n for n in scripts if f"`{n}`" not in listed]
    assert not unlisted, f"scripts/README.md lists no line for {unlisted}"
