"""The real page in a real browser, against a real Lexvoz stack.

Debian's Chromium, driven by playwright-core from the scripts in web/e2e/, opens the page the token
service serves, with a fake microphone that plays a WAV made here (silence and one tone burst). Everything
behind the page is the `Stack` that `make run` starts, in rehearsal mode: livekit-server, the search
server on the embedded Constitution, the Realtime stand-in, the token/page service and the worker.

Each browser script prints one JSON object (what it saw) as its last stdout line and exits 0 only if
its own checks passed; the tests assert on both, so a failure names what the page showed. Screenshots
land in test-artifacts/ at the repository root (git-ignored).

What differs from `make run`, and why: the ports (free ones, so a running local stack is untouched),
a temporary data and log directory, and the worker runs with `--dev`. A production worker binds its
health port 8081 on every interface, so it cannot start next to another stack's worker, and it
refuses jobs above 70 % system CPU, which a 2-core machine running a browser reaches. livekit-server
applies the same 70 % target to the load the worker reports, `--dev` or not, and never retries a
refused dispatch; harness.mjs presses Stop and Start again when that happens, and the tests warn.

One stack serves the module; each scenario starts its own worker on it (the XSS one pointed at a test
search server), so no two workers ever compete for the same rooms.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import struct
import subprocess
import threading
import warnings
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.devstack import livekit_server
from agent.devstack.stack import Stack, StackOptions
from tests import constitution
from tests.mcp_fixture import FakeMcpBehaviour, FakeMcpServer, synthetic_source
from tests.ports import free_port

from .conftest import livekit_port, log_tails

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
WEB_DIR = REPO_ROOT / "web"
ARTIFACTS = REPO_ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; the scripts never download a browser

SCRIPT_TIMEOUT_S = 120.0
LOG_TAIL_LINES = 30

# The fake microphone: 48 kHz mono PCM16, silence with one ~1 s burst. The burst comes late enough
# that the agent has joined (a `--dev` worker starts a job process on demand, a few seconds on a busy
# machine), so it lands as a spoken turn in a settled session.
SAMPLE_RATE = 48_000
TONE_AT_S = 9.0
TONE_S = 1.0
WAV_S = 12.0

READY_STATES = {"escuchando", "hablando", "en espera", "pensando"}
TOOL_DURATION = re.compile(r"^Tiempo de la herramienta: (\d+ ms|\d+,\d s)$")

# Markup that would run if the page ever rendered evidence as HTML: `src=x` fails to load at once,
# so `onerror` fires as soon as such an element exists.
PAYLOAD = '<img src=x onerror="window.__xss=1">'


# --------------------------------------------------------------------------------------------------
# what the tests need from the machine


def _require_browser_tools() -> None:
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


def _free_ports(count: int, *, avoid: set[int]) -> list[int]:
    """`count` distinct free loopback ports from the kernel, none of them in `avoid`."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in avoid and port not in ports:
            ports.append(port)
    return ports


def _write_wav(path: Path, *, tone: bool) -> Path:
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

    @contextlib.contextmanager
    def worker(self, name: str, env: dict[str, str] | None = None) -> Iterator[None]:
        """Run the stack's worker with `env` on top of the stack's own for the duration of the block.

        Each worker logs to its own directory: `Stack.start_worker` appends to worker.log and waits for
        "registered worker" in it, so a second worker on the same file would look ready at once.
        """
        opts = self.stack.opts
        opts.worker_env = dict(env or {})
        opts.log_dir = self.log_root / f"worker-{name}"
        opts.log_dir.mkdir(parents=True)
        try:
            try:
                self.stack.start_worker()
            except (RuntimeError, TimeoutError) as exc:
                pytest.fail(f"the worker did not start: {exc}\n{self.log_tails()}", pytrace=False)
            yield
        finally:
            self.stack.stop_child("worker")


@pytest.fixture(scope="module")
def browser_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserStack]:
    _require_browser_tools()
    base = tmp_path_factory.mktemp("lexvoz-browser")
    lk_port = livekit_port(18_880)
    search_port, web_port, standin_port = _free_ports(3, avoid={lk_port, lk_port + 1})
    options = StackOptions(
        livekit_port=lk_port,
        search_port=search_port,
        web_port=web_port,
        standin_port=standin_port,
        rehearsal=True,
        source=constitution.require(),  # the search server builds its index from it on first start
        data_dir=base / "data",
        log_dir=base / "log" / "stack",
        ledger_path=base / "ledger.sqlite3",
        start_worker=False,
        worker_args=["--dev"],
    )
    stack = Stack(options)
    try:
        stack.start()
    except Exception as exc:  # Stack.start has already stopped what it started
        pytest.fail(f"the Lexvoz stack did not start: {exc}\n{log_tails(base / 'log', LOG_TAIL_LINES)}", pytrace=False)
    ARTIFACTS.mkdir(exist_ok=True)
    running = BrowserStack(
        stack=stack,
        base=base,
        tone_wav=_write_wav(base / "microfono-tono.wav", tone=True),
        silent_wav=_write_wav(base / "microfono-silencio.wav", tone=False),
    )
    try:
        yield running
    finally:
        stack.stop()


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


def _run_script(stack: BrowserStack, script: str, audio: Path, extra_env: dict[str, str] | None = None) -> ScriptRun:
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
        stdout, stderr = proc.communicate(timeout=SCRIPT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        stderr += f"\n(killed after {SCRIPT_TIMEOUT_S:.0f} s)"
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
# a whole session on the embedded Constitution


@pytest.fixture(scope="module")
def session_run(browser_stack: BrowserStack) -> ScriptRun:
    """One session, shared by the tests below: each asserts a different promise about the same run."""
    with browser_stack.worker("constitucion"):
        return _run_script(
            browser_stack,
            "session.mjs",
            browser_stack.tone_wav,
            {"LEXVOZ_E2E_TONE_AT_MS": str(int(TONE_AT_S * 1000))},
        )


def test_session_start_question_sources_stop(session_run: ScriptRun, browser_stack: BrowserStack) -> None:
    """Start → agent joins in Spanish with the rehearsal banner → typed question → cited sources → Stop."""
    assert session_run.passed, session_run.explain(browser_stack)
    session_run.warn_if_retried()
    r = session_run.result
    why = session_run.explain(browser_stack)

    assert r["stateAfterStart"] in READY_STATES, why
    assert {"escuchando", "hablando"} & set(r["agentStates"]), why
    assert "Modo de ensayo" in r["banner"], why

    citations = [card["citation"].lower() for card in r["cards"]]
    assert any("artículo 7" in c for c in citations), why
    # The norm heads the card (its citation); the title line is the Título/Capítulo path, without the norm again.
    assert all(card["citation"].startswith("Constitución") for card in r["cards"]), why
    assert all(card["title"] and "Constitución" not in card["title"] for card in r["cards"]), why
    assert TOOL_DURATION.match(r["toolDuration"]), why

    # The fake microphone reached the agent: its burst became a spoken turn that the agent answered.
    if r["voice"]["expected"]:
        assert r["voice"]["heard"] and r["voice"]["reply"]["text"], why
    else:
        warnings.warn(
            f"the spoken turn was not checked: the agent was listening only {r['readyMs']} ms after Start, "
            f"too close to the microphone's burst at {TONE_AT_S:.0f} s",
            stacklevel=1,
        )

    assert r["stateAfterStop"] == "inactivo", why
    assert r["pageErrors"] == [], why
    assert Path(r["screenshot"]).is_file(), why


def test_rehearsal_answer_reads_back_the_citations(session_run: ScriptRun, browser_stack: BrowserStack) -> None:
    """In rehearsal mode the spoken answer is a fixed template that lists the citations the tool returned."""
    assert session_run.passed, session_run.explain(browser_stack)
    reply = session_run.result["reply"]["text"]
    assert reply.startswith("Modo de ensayo."), reply
    assert "artículo 7" in reply.lower(), reply


# --------------------------------------------------------------------------------------------------
# evidence is text, never markup


@contextlib.contextmanager
def _search_server(behaviour: FakeMcpBehaviour) -> Iterator[FakeMcpServer]:
    """A real MCP search server (the SDK's, see tests/mcp_fixture.py) on its own loop in a thread.

    The test itself is synchronous, blocked on the browser script, and the server has to keep
    answering the worker meanwhile.
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="search-server", daemon=True)
    thread.start()

    async def start() -> FakeMcpServer:
        server = FakeMcpServer(behaviour)
        await server.start()
        return server

    try:
        server = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)
        try:
            yield server
        finally:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=15)
    finally:

        async def drain() -> None:
            # The SDK's streaming responses leave tasks behind; end them here rather than at exit.
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(drain(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


def test_markup_in_evidence_is_shown_as_text(browser_stack: BrowserStack) -> None:
    """A search result carrying <img onerror> shows those characters on the card and runs nothing."""
    token = secrets.token_urlsafe(18)
    hostile = synthetic_source(
        1,
        title=f"Ley Sintética de Prueba {PAYLOAD}",
        excerpt=f"Texto sintético {PAYLOAD} para comprobar que la página no interpreta marcado.",
        official_source_name=f"Gaceta sintética {PAYLOAD}",
    )
    # The gateway must drop this one before it reaches the page: only http(s) links are evidence.
    script_link = synthetic_source(2, official_source_url="javascript:window.__xss=3")
    behaviour = FakeMcpBehaviour(results=[hostile, script_link], token=token)

    with _search_server(behaviour) as server:
        env = {"LEXVOZ_MCP_URL": server.url, "LEXVOZ_MCP_TOKEN": token}
        with browser_stack.worker("busqueda-hostil", env):
            run = _run_script(browser_stack, "xss.mjs", browser_stack.silent_wav, {"LEXVOZ_E2E_PAYLOAD": PAYLOAD})
        queries = list(server.queries)
        auth = list(server.auth_headers)

    why = run.explain(browser_stack)
    assert run.passed, why
    run.warn_if_retried()
    r = run.result
    # The payload went the whole way: asked for by the worker, answered by this server, shown by the page.
    assert any("ley sintética" in q for q in queries), f"the search server saw {queries!r}\n{why}"
    assert auth and all(a == f"Bearer {token}" for a in auth), why
    assert len(r["cards"]) == 1, why  # the javascript: source was dropped by the gateway
    card = r["cards"][0]
    assert PAYLOAD in card["title"] and PAYLOAD in card["excerpt"], why
    assert "<img src=x onerror=" in card["text"], why
    assert r["imagesInPanel"] == 0 and r["imagesInPage"] == 0, why
    assert r["xss"] is None, why
    assert r["scriptLinks"] == [], why
    assert r["pageErrors"] == [], why
