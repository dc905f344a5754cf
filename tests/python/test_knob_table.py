"""README's table of environment knobs against the one table the code reads them through
(csrc/common/knob_table.cc, torch_ring_backend._C.knob_table()): the same knobs, the same
defaults, and every knob that ranks must set alike said to be so in README; and every
TORCH_RING_* name the sources read is in the table. A knob added, renamed or given another
default in one place and not the other fails here."""
import pathlib
import re

from torch_ring_backend import _C

ROOT = pathlib.Path(__file__).resolve().parents[2]


def readme_rows():
    """{name: (default cell, meaning cell)} of README's knob table; a row naming two knobs
    ("`A` / `B`", "`A`, `B`") gives each its own default where the cell lists two."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Environment knobs"):]
    rows = {}
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        names = re.findall(r"`([A-Z0-9_]+)`", cells[0])
        spans = re.findall(r"`[^`]*`", cells[1])
        defaults = spans if len(names) > 1 and len(spans) == len(names) else [cells[1]]
        for i, name in enumerate(names):
            rows[name] = (defaults[min(i, len(defaults) - 1)], cells[2])
    return rows


def default_of(cell):
    """A default cell's value: its first `quoted` span, else its first word ("auto", "-")."""
    quoted = re.search(r"`([^`]*)`", cell)
    return quoted.group(1) if quoted else cell.split()[0]


def test_readme_lists_exactly_the_knobs_of_the_table():
    table = {k["name"] for k in _C.knob_table()}
    readme = set(readme_rows())
    assert readme - table == set(), "in README but not in csrc/common/knob_table.cc"
    assert table - readme == set(), "in csrc/common/knob_table.cc but not in README"


def test_readme_gives_each_knob_the_tables_default():
    rows = readme_rows()
    for k in _C.knob_table():
        cell, _ = rows[k["name"]]
        if k["default"]:
            assert default_of(cell) == k["default"], (k["name"], cell)
        else:  # unset means off or none: README says so with a dash
            assert default_of(cell) == "-", (k["name"], cell)
        if "int_default" in k and k["default"] not in ("auto",):
            assert int(k["default"]) == k["int_default"], k


def test_readme_says_which_knobs_every_rank_must_set_alike():
    rows = readme_rows()
    for k in _C.knob_table():
        _, meaning = rows[k["name"]]
        says = re.search(r"every rank|compared at set-up", meaning, re.IGNORECASE) is not None
        if k["scope"] == "every_rank_alike":
            assert says, f"{k['name']}: README does not say that every rank must set it alike"


def test_every_knob_the_sources_read_is_in_the_table():
    table = {k["name"] for k in _C.knob_table()}
    read = set()
    for path in (ROOT / "csrc").rglob("*"):
        if path.suffix in (".cc", ".h", ".cu", ".cuh"):
            read |= set(re.findall(r'"(TORCH_RING_[A-Z0-9_]+)"', path.read_text()))
    read |= set(re.findall(r'"(TORCH_RING_[A-Z0-9_]+)"', (ROOT / "setup.py").read_text()))
    assert read, "no knob found: the search is broken"
    assert read - table == set(), "read by the sources but not in csrc/common/knob_table.cc"



# The files that read the environment itself: the table's own reader, and env.cc's wrapper
# (whose readString calls name table knobs, and torch's/gloo's MASTER_ADDR, GLOO_SOCKET_IFNAME).
_READERS = {"csrc/common/knob_table.cc", "csrc/common/env.cc"}


def test_no_knob_of_the_table_is_read_around_it():
    """A knob read with getenv (C++) or os.environ (the package) outside the table's readers
    bypasses its default and its check: every such read of a table knob fails here, and so
    does a C++ getenv of any TORCH_* name (a new knob read before it is in the table) or a
    package read of any TORCH_RING_* name. Reads of variables that are not ours (RANK,
    CUDA_MODULE_LOADING, MASTER_ADDR) are allowed."""
    table = {k["name"] for k in _C.knob_table()}
    around = []
    sources = [p for p in (ROOT / "csrc").rglob("*") if p.suffix in (".cc", ".h", ".cu", ".cuh")]
    for path in sources:
        rel = path.relative_to(ROOT).as_posix()
        if rel in _READERS:
            continue
        for name in re.findall(r'getenv\(\s*"([A-Z0-9_]+)"', path.read_text()):
            if name in table or name.startswith("TORCH_"):
                around.append(f"{rel}: getenv(\"{name}\")")
    for path in (ROOT / "torch_ring_backend").rglob("*.py"):
        text = path.read_text()
        reads = re.findall(r'os\.environ(?:\.get\(|\[|\.setdefault\()\s*["\']([A-Z0-9_]+)["\']', text)
        reads += re.findall(r'os\.getenv\(\s*["\']([A-Z0-9_]+)["\']', text)
        for name in reads:
            if name in table or name.startswith("TORCH_RING_"):
                around.append(f"{path.relative_to(ROOT).as_posix()}: os.environ \"{name}\"")
    assert sources, "no source found: the search is broken"
    assert around == [], "read around csrc/common/knob_table.cc: " + "; ".join(around)


def test_the_dump_path_knob_gives_torchs_default():
    # torch's own default: c10d's DebugInfoWriter reads its dump prefix with
    # getCvarString({...TEMP_FILE}, "/tmp/nccl_trace_rank_") and appends the rank.
    import os
    if os.environ.get("TORCH_FR_DUMP_TEMP_FILE"):
        import pytest
        pytest.skip("TORCH_FR_DUMP_TEMP_FILE is set in this environment")
    assert _C.knob_text_or_default("TORCH_FR_DUMP_TEMP_FILE") == "/tmp/nccl_trace_rank_"
