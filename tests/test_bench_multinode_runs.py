"""The repeated cluster-suite runner's own bookkeeping (`bench/multinode_runs.py`): a run it calls passed must
have run tests and skipped none, every failed run must say where, and a question in clear in a kept log is found.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.multinode_runs import FAILURES_FILE, _failures, _junit_counts, clear_text_in_logs
from tests.multinode.test_multinode import TYPED


def test_junit_counts_read_tests_failures_errors_and_skips(tmp_path: Path) -> None:
    xml = tmp_path / "junit.xml"
    xml.write_text('<testsuites><testsuite tests="2" failures="1" errors="1" skipped="0"/></testsuites>')
    assert _junit_counts(xml) == (2, 2, 0)
    xml.write_text('<testsuite tests="2" failures="0" errors="0" skipped="2"/>')
    assert _junit_counts(xml) == (2, 0, 2)
    assert _junit_counts(tmp_path / "missing.xml") == (0, 0, 0)


def test_failures_come_from_the_suites_record_and_a_failed_run_without_one_still_says_so(tmp_path: Path) -> None:
    record = {"test": "t::x", "step": "joining through node B", "room": "r1", "worker": "worker-b"}
    (tmp_path / FAILURES_FILE).write_text(json.dumps(record) + "\n")
    assert _failures(tmp_path, exit_code=1, timed_out=False) == [record]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert _failures(empty, exit_code=0, timed_out=False) == []
    assert "pytest exited with code 3" in _failures(empty, exit_code=3, timed_out=False)[0]["step"]
    assert "did not end within" in _failures(empty, exit_code=-2, timed_out=True)[0]["step"]


def test_a_question_in_clear_in_a_kept_log_is_found_as_written_or_as_json_escapes_it(tmp_path: Path) -> None:
    logs = tmp_path / "run-01" / "logs"
    logs.mkdir(parents=True)
    (logs / "worker-a.log").write_text('{"message": "received job request", "room": "r1"}\n')
    assert clear_text_in_logs(tmp_path) == []
    (logs / "worker-b.log").write_text(json.dumps({"message": TYPED}) + "\n")  # ensure_ascii: \u00e9 escapes
    (logs / "search.log").write_text(f"query: {TYPED}\n", encoding="utf-8")
    assert clear_text_in_logs(tmp_path) == ["run-01/logs/search.log", "run-01/logs/worker-b.log"]
