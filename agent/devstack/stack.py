"""`make run` / `python -m agent run`: the whole local stack as child processes.

livekit-server, the embedded search server, the token and page service, the worker, and, when no
OpenAI key is set, the local Realtime stand-in (rehearsal mode). The end-to-end tests start the
same `Stack`, so what the tests prove is what a developer runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent.devstack import livekit_server
from agent.devstack.first_run import FirstRunError, build_index_if_missing
from agent.devstack.processes import log_tail, terminate, wait_for_text
from agent.settings import DEV_API_KEY, DEV_API_SECRET, SettingsError, StackSettings, load_stack_settings


@dataclass
class StackOptions:
    livekit_port: int = 7880
    search_port: int = 8765
    web_port: int = 8080
    standin_port: int = 8790
    rehearsal: bool | None = None  # None: rehearsal exactly when OPENAI_API_KEY is unset
    source: Path | None = None  # a local Constitution JSON to import instead of downloading
    norms_dir: Path | None = None  # a folder of laws (.txt/.pdf/.jsonl) the search server imports at start
    data_dir: Path = Path("data")
    log_dir: Path = Path("var/log")
    agent_name: str = "lexvoz"
    api_key: str = DEV_API_KEY
    api_secret: str = DEV_API_SECRET
    standin_args: list[str] = field(default_factory=list)
    worker_args: list[str] = field(default_factory=list)  # after `start`, e.g. ["--dev"] for tests
    worker_env: dict[str, str] = field(default_factory=dict)
    livekit_args: list[str] = field(default_factory=list)  # e.g. ["--redis-host", "127.0.0.1:6380"] for a cluster
    search_env: dict[str, str] = field(default_factory=dict)
    web_env: dict[str, str] = field(default_factory=dict)  # the page service's extra settings (tests)
    start_web: bool = True
    start_worker: bool = True
    ledger_path: Path | None = None


_Verdict = Callable[[bytes], bool] | None  # does an error answer's body say the service will never be ready?


@dataclass
class _Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    # livekit-server waits for rooms to drain on the first SIGTERM and exits at once on a second one
    term_twice: bool = False


class Stack:
    """Starts the parts in dependency order and stops them in reverse; a failed start stops the rest."""

    def __init__(self, options: StackOptions | None = None) -> None:
        self.opts = options or StackOptions()
        self.children: list[_Child] = []
        self.mcp_token = secrets.token_urlsafe(24)
        self.rehearsal = (
            self.opts.rehearsal
            if self.opts.rehearsal is not None
            else not os.environ.get("OPENAI_API_KEY", "").strip()  # as the settings read it: blank is unset
        )

    @property
    def livekit_url(self) -> str:
        return f"ws://127.0.0.1:{self.opts.livekit_port}"

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.opts.search_port}/mcp"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.opts.web_port}/"

    @property
    def standin_url(self) -> str:
        return f"http://127.0.0.1:{self.opts.standin_port}"

    def common_env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "LIVEKIT_URL": self.livekit_url,
            "LIVEKIT_API_KEY": self.opts.api_key,
            "LIVEKIT_API_SECRET": self.opts.api_secret,
            "LEXVOZ_AGENT_NAME": self.opts.agent_name,
            "LEXVOZ_MCP_URL": self.mcp_url,
            "LEXVOZ_MCP_TOKEN": self.mcp_token,
            "LEXVOZ_WEB_PORT": str(self.opts.web_port),
            "LEXVOZ_WORKER_PORT": "0",  # the worker's health server: any free loopback port
            "LEXVOZ_REHEARSAL": "1" if self.rehearsal else "0",
            "PYTHONUNBUFFERED": "1",
        }
        if self.rehearsal:
            env["OPENAI_BASE_URL"] = f"{self.standin_url}/v1"
        if self.opts.ledger_path is not None:
            env["LEXVOZ_LEDGER_PATH"] = str(self.opts.ledger_path)
        return env

    def start(self) -> Stack:
        self.opts.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_livekit()
            self._start_search()
            if self.rehearsal:
                self._start_standin()
            if self.opts.start_web:
                self._start_web()
            if self.opts.start_worker:
                self.start_worker()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_livekit(self) -> None:
        log = self.opts.log_dir / "livekit-server.log"
        proc = livekit_server.start(
            api_key=self.opts.api_key,
            api_secret=self.opts.api_secret,
            port=self.opts.livekit_port,
            log_path=log,
            extra_args=self.opts.livekit_args,
        )
        self.children.append(_Child("livekit-server", proc, log, term_twice=True))

    def _start_search(self) -> None:
        port, data_dir = str(self.opts.search_port), str(self.opts.data_dir)
        args = ["-m", "panama_law", "serve", "--host", "127.0.0.1", "--port", port, "--data-dir", data_dir]
        if self.opts.source is not None:
            args += ["--source", str(self.opts.source)]
        if self.opts.norms_dir is not None:
            args += ["--norms-dir", str(self.opts.norms_dir)]
        env = {**self.common_env(), "PANAMA_LAW_TOKEN": self.mcp_token, **self.opts.search_env}
        log = self.opts.log_dir / "search.log"
        this_run = log.stat().st_size if log.exists() else 0  # the log is appended to: older runs' errors are above
        child = self._spawn("search", args, env)
        url = f"http://127.0.0.1:{self.opts.search_port}/healthz"
        try:  # a first-run build (download, embedding) may take minutes; a failed one says so on /healthz
            self._wait(url, "search", timeout=180, ok_only=True, failed=_health_says_error)
        except livekit_server.ReportedFailure:
            reason = _error_line(child.log, this_run) or "its /healthz reports status error"
            raise RuntimeError(f"search did not start: {reason} (log: {child.log})") from None

    def _start_standin(self) -> None:
        port = str(self.opts.standin_port)
        args = ["-m", "realtime_standin", "--host", "127.0.0.1", "--port", port, *self.opts.standin_args]
        self._spawn("realtime-standin", args, self.common_env())
        self._wait(f"{self.standin_url}/healthz", "realtime-standin", timeout=30)

    def _start_web(self) -> None:
        env = {**self.common_env(), **self.opts.web_env}
        self._spawn("web", ["-m", "agent", "web", "--port", str(self.opts.web_port)], env)
        self._wait(f"http://127.0.0.1:{self.opts.web_port}/healthz", "web", timeout=30)

    def run_doctor(self) -> tuple[int, str]:
        """`python -m agent doctor` with exactly the worker's environment; its exit code and table."""
        env = {**self.common_env(), **self.opts.worker_env}
        done = subprocess.run(
            [sys.executable, "-m", "agent", "doctor"], env=env, capture_output=True, text=True, timeout=180
        )
        return done.returncode, (done.stdout + done.stderr).strip()

    def start_worker(self) -> None:
        env = {**self.common_env(), **self.opts.worker_env}
        log = self.opts.log_dir / "worker.log"
        offset = log.stat().st_size if log.exists() else 0  # a restarted worker appends: its last run registered too
        child = self._spawn("worker", ["-m", "agent", "start", *self.opts.worker_args], env)
        wait_for_text(child.log, "registered worker", child.proc, timeout=90, offset=offset)

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> _Child:
        log = self.opts.log_dir / f"{name}.log"
        with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(
                [sys.executable, *args], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        child = _Child(name, proc, log)
        self.children.append(child)
        return child

    def child(self, name: str) -> _Child:
        """The running child named `name` (StopIteration when none is)."""
        return next(c for c in self.children if c.name == name)

    def _wait(self, url: str, name: str, *, timeout: float, ok_only: bool = False, failed: _Verdict = None) -> None:
        child = self.child(name)
        try:
            livekit_server.wait_http(url, child.proc, timeout=timeout, ok_only=ok_only, failed=failed)
        except livekit_server.ReportedFailure:
            raise
        except (TimeoutError, RuntimeError) as exc:
            tail = log_tail(child.log)
            raise RuntimeError(f"{name} did not start: {exc}\n--- last lines of {child.log} ---\n{tail}") from None

    def stop_child(self, name: str) -> None:
        for child in [c for c in self.children if c.name == name]:
            terminate(child.proc, term_twice=child.term_twice)
            self.children.remove(child)

    def stop(self) -> None:
        for child in reversed(self.children):
            terminate(child.proc, term_twice=child.term_twice)
        self.children.clear()

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _health_says_error(body: bytes) -> bool:
    """The search server's /healthz body says its index could not be loaded: it will not become ready."""
    try:
        return bool(json.loads(body).get("status") == "error")
    except (ValueError, AttributeError):
        return False


def _error_line(log: Path, offset: int = 0, wait_s: float = 2.0) -> str | None:
    """The message of the last ERROR record after `offset` (the search server logs why right after /healthz says
    error, so a moment's wait may be needed to read it)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with open(log, "rb") as fh:
                fh.seek(offset)
                lines = fh.read().decode(errors="replace").splitlines()
        except OSError:
            lines = []
        found = [m.group(1).strip() for line in lines if (m := re.search(r"\bERROR\s+[\w.]+:\s*(.+)$", line))]
        if found or time.monotonic() >= deadline:
            return found[-1] if found else None
        time.sleep(0.1)


def _flag(p: argparse.ArgumentParser, flag: str, name: str, kind: type, help_text: str) -> None:
    """A flag whose default is the environment setting of that name, and whose help names the variable."""
    info = StackSettings.model_fields[name]
    help_text += f" (env {info.alias}" + ("" if info.default is None else f", default {info.default}") + ")"
    p.add_argument(flag, dest=name, type=kind, default=None, metavar="PORT" if kind is int else "PATH", help=help_text)


def options_from_args(argv: list[str] | None = None) -> StackOptions:
    """The stack's options: each flag, else its environment variable (an empty one is unset), else the default."""
    p = argparse.ArgumentParser(
        prog="python -m agent run",
        description="Run the whole Lexvoz stack locally. With no search index yet it builds one first, from --source "
        "or by downloading the pinned Constitution JSON (PANAMA_LAW_SOURCE_URL), and shows the progress.",
    )
    _flag(p, "--source", "source", Path, "a local copy of the Constitution JSON to index instead of downloading it")
    _flag(p, "--norms-dir", "norms_dir", Path, "a folder of laws and codes (.txt, .pdf, .jsonl) to import as well")
    _flag(p, "--web-port", "web_port", int, "port of the page and token service")
    _flag(p, "--livekit-port", "livekit_port", int, "livekit-server's signalling port")
    _flag(p, "--search-port", "search_port", int, "port of the search server")
    _flag(p, "--standin-port", "standin_port", int, "port of the Realtime stand-in (rehearsal mode)")
    _flag(p, "--data-dir", "data_dir", Path, "where the search index is built and kept")
    _flag(p, "--log-dir", "log_dir", Path, "where each part's log is written")
    args = p.parse_args(argv)
    flags = {info.alias or name: getattr(args, name) for name, info in StackSettings.model_fields.items()}
    settings = load_stack_settings({alias: value for alias, value in flags.items() if value is not None})
    return StackOptions(**settings.model_dump(), start_worker=False)  # the doctor checks the deployment first


def main(argv: list[str] | None = None) -> int:
    try:
        options = options_from_args(argv)
    except SettingsError as exc:
        print(f"lexvoz: {exc}", file=sys.stderr)
        return 2
    # Until the stack's own handlers are in place, SIGTERM stops the first-run build the way Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        build_index_if_missing(options)
    except FirstRunError as exc:
        print(f"lexvoz: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("Stopped.", file=sys.stderr)
        return 130
    stack = Stack(options)
    if stack.rehearsal:
        print(
            "OPENAI_API_KEY is not set: starting in REHEARSAL MODE with the local Realtime protocol stand-in.\n"
            "Typed questions go through the real tool, gateway and search server; spoken answers are a fixed "
            "Spanish template.",
            flush=True,
        )
    stop = threading.Event()
    _install_signal_handlers(stop.set)
    try:
        stack.start()
        code, table = stack.run_doctor()
        print(table, flush=True)
        if code != 0:
            print("lexvoz: the doctor found problems (above); fix them and run again.", file=sys.stderr)
            stack.stop()
            return 1
        stack.start_worker()
    except livekit_server.LiveKitServerMissing as exc:
        stack.stop()
        print(f"lexvoz: {exc}", file=sys.stderr)
        return 1
    except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
        stack.stop()
        print(f"lexvoz: {exc}", file=sys.stderr)
        return 1
    print(
        f"\nLexvoz is ready: open {stack.web_url} in a browser.  (Ctrl-C stops everything; logs in "
        f"{stack.opts.log_dir})\n",
        flush=True,
    )
    try:
        while not stop.is_set():
            dead = [c for c in stack.children if c.proc.poll() is not None]
            if dead:
                print(
                    f"lexvoz: {dead[0].name} exited unexpectedly; stopping everything.\n{log_tail(dead[0].log)}",
                    file=sys.stderr,
                )
                return 1
            stop.wait(0.5)
    finally:
        print("Stopping…", flush=True)
        stack.stop()
    return 0


def _install_signal_handlers(callback: Callable[[], None]) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: callback())
