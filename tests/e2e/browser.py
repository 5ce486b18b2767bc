"""Plumbing for the browser end-to-end tests (test_browser_e2e.py): the stack's workers, the node scripts
in web/e2e/, the fake microphone's WAV, and test servers the worker talks to while a script runs.

Kept apart from the tests so that the test module reads as the list of promises the page keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import threading
import warnings
import wave
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiohttp
import pytest

from agent.devstack import livekit_server
from agent.devstack.processes import wait_for_text
from agent.devstack.stack import Stack
from tests import constitution
from tests.fake_realtime_endpoint import FakeRealtimeEndpoint
from tests.mcp_fixture import FakeMcpBehaviour, FakeMcpServer
from tests.ports import free_port

from .conftest import log_tails

REPO_ROOT = Path(__file__).resolve().parents[2]
WEB_DIR = REPO_ROOT / "web"
ARTIFACTS = REPO_ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; the scripts never download a browser

SCRIPT_TIMEOUT_S = 120.0
LOG_TAIL_LINES = 30

# The fake microphone: 48 kHz mono PCM16, silence with one ~1 s burst. The burst comes late enough
# that the agent has joined and finished its greeting (a `--dev` worker starts a job process on demand:
# the agent listened 6.3 s after Start here, 7.4 s on a loaded host), so it lands as a spoken turn in a
# settled session.
SAMPLE_RATE = 48_000
TONE_AT_S = 13.0
TONE_S = 1.0
WAV_S = 15.0

T = TypeVar("T")

# --------------------------------------------------------------------------------------------------
# what the tests need from the machine


def require_browser_tools() -> None:
    """Skip, saying how to get it, when a part only `make test` installs is missing."""
    constitution.require()
    if not CHROMIUM.is_file():
        pytest.skip("Debian's chromium is not installed (`make browser`, or apt-get install chromium)")
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    if not (WEB_DIR / "node_modules" / "playwright-core").is_dir():
        pytest.skip("web dependencies are not installed (`make web-deps`, or cd web && npm ci)")
    if not (WEB_DIR / "dist" / "index.html").is_file():
        pytest.skip("the page is not built (`make web`, or cd web && npm run build)")
    try:
        livekit_server.find_or_build(build=False, log=False)
    except livekit_server.LiveKitServerMissing as exc:
        pytest.skip(f"livekit-server not available (`make livekit-server`): {exc}")


def free_ports(count: int, *, avoid: set[int]) -> list[int]:
    """`count` distinct free loopback ports from the kernel, none of them in `avoid`."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in avoid and port not in ports:
            ports.append(port)
    return ports


def write_wav(path: Path, *, tone: bool) -> Path:
    """The fake microphone's file: silence, plus (with `tone`) a burst the stand-in's energy VAD hears.

    A few voice-band harmonics rather than one sine, so the browser's noise suppression, which is on
    for the page's microphone, does not treat it as a steady hum and flatten it.
    """
    total = int(WAV_S * SAMPLE_RATE)
    first, last = int(TONE_AT_S * SAMPLE_RATE), int((TONE_AT_S + TONE_S) * SAMPLE_RATE)
    frames = bytearray()
    for i in range(total):
        value = 0.0
        if tone and first <= i < last:
            t = i / SAMPLE_RATE
            value = sum(0.6**k * math.sin(2 * math.pi * f * t) for k, f in enumerate((220.0, 440.0, 660.0))) / 1.96
        frames += struct.pack("<h", int(0.3 * 32767 * value))
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(bytes(frames))
    return path


# --------------------------------------------------------------------------------------------------
# the stack and its worker


@dataclass
class BrowserStack:
    """The running stack without a worker; each scenario starts the worker it needs."""

    stack: Stack
    base: Path
    tone_wav: Path
    silent_wav: Path

    @property
    def log_root(self) -> Path:
        return self.base / "log"

    def log_tails(self) -> str:
        return log_tails(self.log_root, LOG_TAIL_LINES)

    def worker_log(self, name: str) -> Path:
        return self.log_root / f"worker-{name}" / "worker.log"

    @contextlib.contextmanager
    def worker(self, name: str, env: dict[str, str] | None = None, *, warm: bool = False) -> Iterator[None]:
        """Run the stack's worker with `env` on top of the stack's own for the duration of the block.

        Each worker logs to its own directory: `Stack.start_worker` appends to worker.log and waits for
        "registered worker" in it, so a second worker on the same file would look ready at once.

        `warm` keeps one job process started ahead (`--dev` keeps none) and waits until it is, as a production
        worker's first room finds it: otherwise the first room waits for a process to start, 16 s on a loaded
        CI host, and the page's timed microphone burst lands while the agent is still greeting.
        """
        opts = self.stack.opts
        opts.worker_env = {**({"LEXVOZ_IDLE_PROCESSES": "1"} if warm else {}), **(env or {})}
        opts.log_dir = self.worker_log(name).parent
        opts.log_dir.mkdir(parents=True)
        try:
            try:
                self.stack.start_worker()
                if warm:
                    worker = self.stack.child("worker")
                    wait_for_text(worker.log, "process initialized", worker.proc, timeout=90)
            except (RuntimeError, TimeoutError) as exc:
                pytest.fail(f"the worker did not start: {exc}\n{self.log_tails()}", pytrace=False)
            yield
        finally:
            self.stack.stop_child("worker")


# The worker's console format: "2026-01-01 12:00:00,000 - ERROR logger - message", the level in colour.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LEVEL = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - (\w+) ")


def error_lines(log: Path) -> list[str]:
    """The ERROR and CRITICAL records of a worker log, one line each, colour codes removed."""
    lines = (_ANSI.sub("", line) for line in log.read_text(errors="replace").splitlines())
    return [line for line in lines if (m := _LEVEL.match(line)) and m.group(1) in ("ERROR", "CRITICAL")]


def tracebacks(text: str) -> list[str]:
    """Every traceback in a stretch of worker log, one line each naming it: the record it belongs to (level,
    logger, message), then the exception it ends with."""
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    found: list[str] = []
    for i, line in enumerate(lines):
        if "Traceback" not in line:
            continue
        record = next((lines[j] for j in range(i - 1, -1, -1) if _LEVEL.match(lines[j])), "(no log record before it)")
        end = next((k for k in range(i + 1, len(lines)) if _LEVEL.match(lines[k])), len(lines))
        exception = next(
            (lines[k] for k in range(end - 1, i, -1) if lines[k].strip() and not lines[k][0].isspace()), ""
        )
        found.append(f"{record.strip()} -> {exception.strip() or '(no exception line)'}")
    return found


class LogWindow:
    """What a log gains from now on: remembers its size at creation, `read()` returns everything after it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = path.stat().st_size if path.exists() else 0

    def read(self) -> str:
        if not self.path.exists():
            return ""
        with self.path.open("rb") as log:
            log.seek(self.start)
            return log.read().decode(errors="replace")


# --------------------------------------------------------------------------------------------------
# running a browser script


@dataclass(frozen=True)
class ScriptRun:
    script: str
    returncode: int
    result: dict[str, Any]
    stderr: str

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and self.result.get("ok") is True

    def warn_if_retried(self) -> None:
        """Say so when the page needed more than one Start: a dispatch refused under CPU load (see harness.mjs)."""
        attempts = self.result.get("startAttempts", 1)
        if attempts > 1:
            warnings.warn(
                f"{self.script}: the agent joined only on Start number {attempts}; livekit-server refused the "
                "earlier dispatch while the worker reported a system CPU load above its target",
                stacklevel=2,
            )

    def explain(self, stack: BrowserStack) -> str:
        """Everything needed to see why a run failed, without rerunning it."""
        return (
            f"{self.script} exited {self.returncode}: {self.result.get('error', '(no error reported)')}\n"
            f"result: {json.dumps(self.result, ensure_ascii=False, indent=1)[:4000]}\n"
            f"stderr: {self.stderr[-2000:]}\n{stack.log_tails()}"
        )


def run_script(
    stack: BrowserStack,
    script: str,
    audio: Path,
    extra_env: dict[str, str] | None = None,
    *,
    timeout_s: float = SCRIPT_TIMEOUT_S,
) -> ScriptRun:
    env = {
        **os.environ,
        "LEXVOZ_E2E_URL": stack.stack.web_url,
        "LEXVOZ_E2E_OUT": str(ARTIFACTS),
        "LEXVOZ_E2E_AUDIO": str(audio),
        **(extra_env or {}),
    }
    # Its own process group, so a hung run can be ended together with the browser it launched.
    proc = subprocess.Popen(
        ["node", str(WEB_DIR / "e2e" / script)],
        cwd=WEB_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        stderr += f"\n(killed after {timeout_s:.0f} s)"
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        result = {"error": f"last stdout line is not JSON: {lines[-1][:500]}"}
    if not isinstance(result, dict):
        result = {"error": f"unexpected result: {result!r}"[:500]}
    print(f"{script}: {json.dumps(result, ensure_ascii=False)}")  # in the report with -rP, pass or fail
    return ScriptRun(script, proc.returncode, result, stderr)


# --------------------------------------------------------------------------------------------------
# test servers the worker talks to, on an event loop of their own


class RunOnLoop(Protocol):
    """Run a coroutine on the loop thread and wait for its result, at most `timeout` seconds."""

    def __call__(self, awaitable: Awaitable[T], timeout: float = 30.0) -> T: ...


@contextlib.contextmanager
def _loop_thread(name: str) -> Iterator[RunOnLoop]:
    """An event loop in a thread, and a way to run coroutines on it from the (synchronous) test.

    The test itself is blocked on the browser script, and a server on this loop has to keep answering
    the worker meanwhile.
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()

    def run(awaitable: Awaitable[T], timeout: float = 30.0) -> T:
        async def call() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout=timeout)

    try:
        yield run
    finally:

        async def drain() -> None:
            # The MCP SDK's streaming responses leave tasks behind; end them here rather than at exit.
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(drain(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


@contextlib.contextmanager
def search_server(behaviour: FakeMcpBehaviour) -> Iterator[FakeMcpServer]:
    """A real MCP search server (the SDK's, see tests/mcp_fixture.py) on its own loop in a thread."""
    with _loop_thread("search-server") as run:

        async def start() -> FakeMcpServer:
            server = FakeMcpServer(behaviour)
            await server.start()
            return server

        server = run(start())
        try:
            yield server
        finally:
            run(server.stop())


@contextlib.contextmanager
def realtime_endpoint(*, refuse: int) -> Iterator[FakeRealtimeEndpoint]:
    """A Realtime endpoint on loopback that answers every handshake with HTTP `refuse` (see the module)."""
    with _loop_thread("realtime-endpoint") as run:
        endpoint = FakeRealtimeEndpoint(refuse=refuse)
        run(endpoint.__aenter__())
        try:
            yield endpoint
        finally:
            run(endpoint.__aexit__(None, None, None))


@contextlib.contextmanager
def conversation_in_progress(web_url: str, *, within: float = 90.0) -> Iterator[Callable[[], None]]:
    """Someone else talking to the agent: a simulated person (tests/person.py) who got a room from the page
    service and whose agent listens, on a loop of its own. Yields `leave()`, which ends that conversation;
    leaving the block ends it too."""
    from tests.person import Person  # livekit's native client loads only for the tests that use it

    with _loop_thread("occupant") as run:

        async def join() -> tuple[Person, aiohttp.ClientSession]:
            http = aiohttp.ClientSession()
            person = await Person.from_page_service(web_url, http)
            await person.connect()
            await person.wait_until_listening(within)
            return person, http

        person, http = run(join(), timeout=within + 30)
        left = False

        def leave() -> None:
            nonlocal left
            if not left:
                left = True
                run(person.aclose())
                run(http.close())

        try:
            yield leave
        finally:
            with contextlib.suppress(Exception):
                leave()
