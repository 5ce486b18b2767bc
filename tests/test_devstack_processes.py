"""The stack's child-process helpers: waiting for a log line after a restart, and stopping a whole group."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.devstack.processes import terminate, wait_for_text


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)


def test_a_line_before_the_offset_is_not_taken_for_a_fresh_one(tmp_path: Path) -> None:
    """A restarted worker appends to its log: its first run's "registered worker" must not count again."""
    log = tmp_path / "worker.log"
    log.write_text("registered worker\n")
    proc = _sleeper()
    try:
        offset = log.stat().st_size
        with pytest.raises(TimeoutError, match="registered worker"):
            wait_for_text(log, "registered worker", proc, timeout=0.5, offset=offset)
        with log.open("a") as fh:
            fh.write("registered worker\n")
        wait_for_text(log, "registered worker", proc, timeout=2, offset=offset)
    finally:
        terminate(proc)


def test_a_child_that_exits_is_reported_with_its_code_and_log(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_text("Traceback: it broke\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    proc.wait(10)
    with pytest.raises(RuntimeError, match=r"worker exited with code 3\n.*it broke"):
        wait_for_text(log, "registered worker", proc, timeout=5)


def test_terminate_leaves_nothing_of_the_group_behind(tmp_path: Path) -> None:
    """What the child started in its group (the worker's forkserver) is stopped with it."""
    pidfile = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline, "the child never started its own child"
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    terminate(proc, timeout=5)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{grandchild}").exists() and "Z" not in _state(grandchild):
        assert time.monotonic() < deadline, "the grandchild outlived terminate()"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "Z"
