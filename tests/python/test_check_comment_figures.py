"""scripts/check_comment_figures.py: no comment in csrc/ states a measured figure. Checked on a
small repository made here (figures in each shape the check reads, design parameters beside
them, a figure in a string) and on this tree itself."""
from tree_checks import ROOT, make_repo, run_check


def test_measured_figures_are_named_and_design_parameters_pass(tmp_path):
    root = make_repo(tmp_path, {
        "csrc/a.cc": (
            "// Why a spin: the peer usually arrives within it. A 500 us spin where each rank\n"
            "// has a core; heartbeats every 250 ms.\n"
            "int a;  // moving it at 2 GB/s, the formula's rate\n"
            "// On the 2-core VM a 4 KiB call took\n"
            "// 13.5 us with the spin.\n"
            "const char* s = \"// 3x faster\";\n"
            "const char* u = \"http://x\";  // its first call took 2 ms\n"),
        "csrc/b.h": "/* not read: block comments */\n// The AVX-512 loop is 40% faster here.\n",
        "docs/c.md": "Measured: 12 us per call, 3x faster.\n",
    })
    done = run_check("check_comment_figures.py", root)
    assert done.returncode == 1, done.stdout
    assert "csrc/a.cc:5: a measured figure in a comment: On the 2-core VM a 4 KiB call took " \
           "13.5 us with the spin." in done.stdout, done.stdout
    assert "csrc/b.h:2: a measured figure in a comment: The AVX-512 loop is 40% faster here." \
        in done.stdout, done.stdout
    assert "csrc/a.cc:7: a measured figure in a comment: its first call took 2 ms" in done.stdout
    assert "3 figure(s) in comments" in done.stdout, done.stdout


def test_no_comment_of_this_tree_states_a_measured_figure():
    done = run_check("check_comment_figures.py", ROOT)
    assert done.returncode == 0, done.stdout
