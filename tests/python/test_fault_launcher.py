"""The fault scenarios' launcher (fault_launcher.py) reading what the ranks reported: a rank that
died before its report must fail the test that expected it, not leave it with nothing to check
(test_use_after_destroy_is_a_clear_error looped over no reports when both ranks crashed)."""
import json
from types import SimpleNamespace

import pytest

from fault_launcher import ScenarioRun


def _run(reports, exit_codes):
    outputs = ["some log line\n" + "".join(f"RESULT {json.dumps(r)}\n" for r in rank_reports)
               for rank_reports in reports]
    return ScenarioRun([SimpleNamespace(returncode=c) for c in exit_codes], outputs)


def test_every_rank_returns_each_ranks_report():
    run = _run([[{"rank": 0, "ok": True}], [{"rank": 1, "ok": False}]], [0, 0])
    assert run.every_rank(2) == {0: {"rank": 0, "ok": True}, 1: {"rank": 1, "ok": False}}


def test_a_rank_that_died_before_its_report_fails_by_name():
    run = _run([[{"rank": 0, "ok": True}], []], [0, -11])
    died = r"ranks \[1\] reported nothing \(exit codes \[0, -11\]\)"
    with pytest.raises(AssertionError, match=died):
        run.every_rank(2)
    with pytest.raises(AssertionError, match=r"ranks \[0, 1\] reported nothing"):
        _run([[], []], [-11, -11]).every_rank(2)


def test_a_phase_counts_only_its_own_reports():
    run = _run([[{"rank": 0}, {"rank": 0, "phase": "after"}], [{"rank": 1}]], [0, 0])
    assert sorted(run.every_rank(2)) == [0, 1]
    with pytest.raises(AssertionError, match=r"ranks \[1\]"):
        run.every_rank(2, phase="after")
