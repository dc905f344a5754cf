"""The mutation run (tests/mutation/mutate.py, last in CI) stops with "the text to change occurs
0 times" when a refactor changes a line a mutant edits. This checks every mutant's text now, in
a second, so such a change fails where it is made."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_mutants_text_occurs_exactly_once():
    spec = importlib.util.spec_from_file_location("mutate", os.path.join(ROOT, "tests", "mutation", "mutate.py"))
    mutate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutate)
    problems = []
    for m in mutate.MUTANTS:
        with open(os.path.join(ROOT, m.path)) as f:
            n = f.read().count(m.find)
        if n != 1:
            problems.append(f"{m.name}: its text occurs {n} times in {m.path}")
    assert len({m.name for m in mutate.MUTANTS}) == len(mutate.MUTANTS), "duplicate mutant names"
    assert not problems, problems
