"""`make run`'s first run: the search index is built in the foreground, before the rest of the stack starts.

Kept apart from `stack.py` because it runs before any part of the stack exists and shares nothing with it but
the options: a child process whose lines go to the terminal, and one line saying what to do when it fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from agent.devstack.stack import StackOptions


class FirstRunError(RuntimeError):
    """The search index could not be built before the stack starts; the message is the one line to show."""


LOCAL_COPY_HINT = "PANAMA_LAW_SOURCE=PATH make run"


def build_index_if_missing(opts: StackOptions, out: TextIO | None = None) -> bool:
    """First run: build the search index in the foreground, its progress on the terminal, before anything starts.

    The search server would build it too, but in a background thread behind a /healthz that says only "loading":
    the person running `make run` would watch nothing happen while the download and the embedding run, and
    without network learn why only from a log file. The build is a child `python -m panama_law download` (or
    `import SOURCE`), the code the search server runs, in its own session so that Ctrl-C reaches this process
    alone, which then stops it. Its lines are passed on as they come, except its one `error:` line, which becomes
    this error's message. True when it built one.
    """
    from panama_law.index.disk import index_path  # the search server's own answer to "is there an index?"

    if index_path(opts.data_dir).is_file():
        return False
    out = out or sys.stdout
    data_dir = str(opts.data_dir)
    if opts.source is not None:
        command = ["import", str(opts.source), "--data-dir", data_dir]
        print(f"No search index in {data_dir} yet: building it from {opts.source} (first run only) …", file=out)
    else:
        command = ["download", "--data-dir", data_dir]
        print(f"No search index in {data_dir} yet: downloading the Constitution (first run only) …", file=out)
    out.flush()
    proc = _spawn([sys.executable, "-m", "panama_law", *command], {**os.environ, "PYTHONUNBUFFERED": "1"})
    errors: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("error: "):
                errors.append(line.removeprefix("error: ").strip())
            else:
                out.write(f"  {line}")
                out.flush()
        proc.wait()
    finally:
        _stop(proc)
    if proc.returncode == 0:
        return True
    reason = errors[-1] if errors else f"`python -m panama_law {command[0]}` exited with code {proc.returncode}"
    if opts.source is not None:
        raise FirstRunError(f"the search index could not be built from {opts.source}: {reason}")
    raise FirstRunError(
        f"the search index could not be built: {reason}. Without network, build it from a local copy of the "
        f"Constitution JSON: {LOCAL_COPY_HINT}"
    )


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """Start the build with Ctrl-C and SIGTERM held back meanwhile: one arriving inside `Popen` would leave a child
    running that nobody knows of. A signal that came is raised right after, when the caller can stop the child."""
    deferred: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
    previous = {sig: signal.signal(sig, lambda sig, _frame: deferred.append(sig)) for sig in held}
    try:
        proc = subprocess.Popen(
            args,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if deferred:
        _stop(proc)
        raise KeyboardInterrupt
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    """The build's whole process group, at once when it has exited already; after Ctrl-C, SIGTERM then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait_s)
        except ProcessLookupError:
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # anything it started and left behind
    except (ProcessLookupError, PermissionError):
        pass
