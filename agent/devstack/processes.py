"""Child processes of the local stack, the tests and the benchmarks: stopping them cleanly, waiting for them.

Each program runs in its own session (process group), so that what a program leaves behind (the worker's
forkserver and job processes) can be found and stopped with it, and nothing outlives the stack.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def terminate(proc: subprocess.Popen[bytes], timeout: float = 15, *, term_twice: bool = False) -> None:
    """Stop a child the way its own shutdown expects, then make sure nothing of its group is left.

    The signal goes to the child alone, not its process group: the worker's multiprocessing forkserver
    and idle job processes share that group, and killing them under a worker that is still starting
    them is what made a normal Ctrl-C log "Task exception was never retrieved ... EOFError" at ERROR.
    The worker closes its own job processes; whatever still lives in the group afterwards is killed.
    """
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        if term_twice:
            try:
                proc.wait(0.3)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait(5)
    _reap_group(proc.pid)


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _reap_group(pgid: int, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, whatever is left in the child's process group (started with a new session)."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _signal_group(pgid, 0):
            return
        time.sleep(0.1)
    _signal_group(pgid, signal.SIGKILL)


def wait_for_text(path: Path, needle: str, proc: subprocess.Popen[bytes], *, timeout: float, offset: int = 0) -> None:
    """Wait until `needle` shows in the child's log after byte `offset` (a restarted child appends to its log), or
    say why it never will: the child exited, or the time ran out (with the log's tail either way)."""
    deadline = time.monotonic() + timeout
    wanted = needle.encode()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{path.stem} exited with code {proc.returncode}\n{log_tail(path)}")
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                if wanted in fh.read():
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{path.stem}: no {needle!r} in its log within {timeout:.0f} s\n{log_tail(path)}")


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
