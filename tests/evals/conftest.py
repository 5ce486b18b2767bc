"""The judge fixture, and the end of an eval run: a results table and one line on what was not judged.

Each eval test records one row (scenario, behaviour, check, pass/fail, reason) as a user property; the
table is printed when the run asked for the evals (`-m evals`, as `make evals` does) or ran live, so the
offline harness inside `make test` adds a single closing line instead of a page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from _pytest.reports import TestReport
from _pytest.terminal import TerminalReporter

from tests.evals.live import SKIP_REASON, Judge, live_settings

ROW_PROPERTY = "eval"
_rows: list[dict[str, Any]] = []
_judge_skips: list[str] = []

RecordRow = Callable[[str, str, str, bool, str], None]


@pytest.fixture
def record_row(record_property: Callable[[str, object], None]) -> RecordRow:
    """`record_row(scenario, behaviour, check, passed, reason)`: this test's line in the results table."""

    def record(scenario: str, behaviour: str, check: str, passed: bool, reason: str) -> None:
        row = {"scenario": scenario, "behaviour": behaviour, "check": check, "passed": passed, "reason": reason}
        record_property(ROW_PROPERTY, row)

    return record


@pytest.fixture
async def judge() -> AsyncIterator[Judge]:
    settings = live_settings()
    if settings is None:
        pytest.skip(SKIP_REASON)
    j = Judge(settings)
    try:
        yield j
    finally:
        await j.aclose()


def pytest_runtest_logreport(report: TestReport) -> None:
    for name, value in report.user_properties:
        if name == ROW_PROPERTY and report.when == "call":
            _rows.append(dict(value))
    if report.skipped and SKIP_REASON in str(report.longrepr):
        _judge_skips.append(report.nodeid)


def pytest_terminal_summary(terminalreporter: TerminalReporter, config: pytest.Config) -> None:
    if not _rows and not _judge_skips:
        return
    settings = live_settings()
    if _rows and (settings is not None or "evals" in str(config.getoption("markexpr", ""))):
        _print_table(terminalreporter)
    if settings is not None:
        where = f" at {settings.openai_base_url}" if settings.openai_base_url else ""
        line = f"evals ran live against {settings.realtime_model}{where} with the LLM judge"
        terminalreporter.write_line(line, bold=True)
    elif _judge_skips:
        terminalreporter.write_line(
            f"evals ran offline against the Realtime stand-in with scripted behaviours; {len(_judge_skips)} "
            f"judge checks skipped: {SKIP_REASON}.",
            yellow=True,
            bold=True,
        )


def _print_table(tr: TerminalReporter) -> None:
    headers = ("scenario", "behaviour", "check", "result", "reason")
    lines = [
        (r["scenario"], r["behaviour"], r["check"], "pass" if r["passed"] else "FAIL", _short(r["reason"]))
        for r in _rows
    ]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers[:-1])]
    tr.section("eval results")
    tr.write_line("  ".join(h.ljust(w) for h, w in zip(headers[:-1], widths, strict=True)) + "  " + headers[-1])
    for line in lines:
        cells = "  ".join(c.ljust(w) for c, w in zip(line[:-1], widths, strict=True))
        tr.write_line(f"{cells}  {line[-1]}", red=line[3] == "FAIL")


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
