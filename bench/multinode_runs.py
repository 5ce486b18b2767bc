"""The two-node cluster suite, N runs in a row: how often it passes on this host, and where it fails when it does.

A cluster test that fails once in ten runs passes a single run nine times out of ten, so one green run says
little; this runs `python -m pytest -m multinode tests/multinode` `--runs` times (default 10) and never stops
early. Each run gets a folder under `--keep` (default bench/results/multinode-runs/) with pytest's output
(`pytest.txt`, `junit.xml`) and the cluster's logs (`logs/`: both livekit-server nodes, both workers, redis,
the search server, the stand-in; the suite writes them there because `LEXVOZ_MULTINODE_LOG_DIR` says so) and,
when a test failed, `logs/failures.jsonl`: the test, step, room and worker of each failure.

With `--lock FILE` every run takes an exclusive `flock` on FILE for itself and releases it afterwards, so
on a shared host other heavy jobs can run between runs; the time spent waiting is kept apart from the
run's duration. Prints one JSON line and writes the same figures to bench/results/multinode_runs.json
(after every run, so an interrupted series keeps what it measured): runs, passed, failed, and per run
its duration, load average at start and end, and the failures. It also checks every kept log for the
suite's questions in clear (`clear_text_in_logs`, which must stay empty: the logs are redacted).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.multinode.conftest import FAILURES_FILE, LOG_DIR_ENV, SPOKEN_QUESTION  # noqa: E402
from tests.multinode.test_multinode import TYPED  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "multinode_runs.json"
KEEP = ROOT / "bench" / "results" / "multinode-runs"
SUITE = ["-m", "pytest", "-m", "multinode", "tests/multinode", "--tb=short", "-rA"]
RUN_TIMEOUT_S = 900.0  # a run takes a few minutes; one that hangs is stopped and counted as failed
INTERRUPT_GRACE_S = 60.0  # after Ctrl-C pytest tears the cluster down; then it is killed


@dataclass
class Run:
    run: int
    passed: bool
    exit_code: int
    duration_s: float
    lock_wait_s: float
    load_start: list[float]
    load_end: list[float]
    tests: int = 0
    failed_tests: int = 0
    skipped: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    folder: str = ""


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@contextlib.contextmanager
def _locked(path: Path | None) -> Iterator[float]:
    """Hold an exclusive flock on `path` (if given) for the block; yields how long it took to get it."""
    if path is None:
        yield 0.0
        return
    started = time.monotonic()
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield time.monotonic() - started
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _junit_counts(path: Path) -> tuple[int, int, int]:
    """Tests, failed or errored, skipped, from pytest's junit XML (zeros when there is none)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return 0, 0, 0
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return total, bad, skipped


def _failures(logs: Path, exit_code: int, timed_out: bool) -> list[dict[str, Any]]:
    """Where each failure happened, as the suite recorded it; a failed run with no record says what it knows."""
    records: list[dict[str, Any]] = []
    path = logs / FAILURES_FILE
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                records.append(json.loads(line))
    if timed_out:
        records.append({"test": None, "step": f"the run did not end within {RUN_TIMEOUT_S:.0f} s", "room": ""})
    elif exit_code != 0 and not records:
        records.append({"test": None, "step": f"pytest exited with code {exit_code}, no failure recorded", "room": ""})
    return records


def _run_once(number: int, folder: Path, lock: Path | None, python: str) -> Run:
    if folder.exists():
        shutil.rmtree(folder)
    logs = folder / "logs"
    logs.mkdir(parents=True)
    env = {**os.environ, LOG_DIR_ENV: str(logs)}
    args = [python, *SUITE, f"--junitxml={folder / 'junit.xml'}"]
    with _locked(lock) as waited, open(folder / "pytest.txt", "wb") as out:
        load_start, started = _load(), time.monotonic()
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            code = proc.wait(RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.send_signal(signal.SIGINT)  # pytest tears the cluster down on Ctrl-C
            try:
                code = proc.wait(INTERRUPT_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
        duration, load_end = time.monotonic() - started, _load()
    tests, bad, skipped = _junit_counts(folder / "junit.xml")
    passed = code == 0 and not timed_out and tests > 0 and bad == 0 and skipped == 0
    return Run(
        run=number,
        passed=passed,
        exit_code=code,
        duration_s=round(duration, 1),
        lock_wait_s=round(waited, 1),
        load_start=load_start,
        load_end=load_end,
        tests=tests,
        failed_tests=bad,
        skipped=skipped,
        failures=_failures(logs, code, timed_out),
        folder=str(folder),
    )


def clear_text_in_logs(keep: Path) -> list[str]:
    """Kept log files that carry one of the suite's questions in clear (there must be none)."""
    needles = [form for q in (TYPED, SPOKEN_QUESTION) for form in (q.encode(), json.dumps(q)[1:-1].encode())]
    found = []
    for path in sorted(keep.rglob("logs/*.log")):
        data = path.read_bytes()
        if any(n in data for n in needles):
            found.append(str(path.relative_to(keep)))
    return found


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True)
    return done.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def _summary(runs: list[Run], planned: int, keep: Path, commit: str) -> dict[str, Any]:
    streak = 0
    for run in runs:
        streak = streak + 1 if run.passed else 0
    return {
        "runs": len(runs),
        "planned": planned,
        "passed": sum(r.passed for r in runs),
        "failed": sum(not r.passed for r in runs),
        "passes_in_a_row_at_end": streak,
        "commit": commit,
        "cpu_count": os.cpu_count(),
        "keep": str(keep),
        "clear_text_in_logs": clear_text_in_logs(keep),
        "per_run": [asdict(r) for r in runs],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="how many runs in a row (default 10)")
    parser.add_argument("--keep", type=Path, default=KEEP, help="a folder per run goes here (default %(default)s)")
    parser.add_argument("--lock", type=Path, help="take an exclusive flock on this file for each run")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    keep: Path = args.keep.resolve()
    keep.mkdir(parents=True, exist_ok=True)
    commit = _commit()
    runs: list[Run] = []
    for number in range(1, args.runs + 1):
        run = _run_once(number, keep / f"run-{number:02d}", args.lock, sys.executable)
        runs.append(run)
        where = "; ".join(
            f"{f.get('test')}: {f.get('step')} room={f.get('room')} worker={f.get('worker')}" for f in run.failures
        )
        print(
            f"run {number}/{args.runs}: {'passed' if run.passed else 'FAILED'} in {run.duration_s:.0f} s "
            f"(load {run.load_start[0]} -> {run.load_end[0]}){': ' + where if where else ''}",
            file=sys.stderr,
            flush=True,
        )
        summary = _summary(runs, args.runs, keep, commit)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(summary, ensure_ascii=False))
    return 0 if summary["failed"] == 0 and not summary["clear_text_in_logs"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
