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
offers a room once; a room a worker refused gets an agent when the page asks again (`POST /api/agent`),
and harness.mjs presses Stop and Start again only if even that brings none (the tests warn).

One stack serves the module; each scenario starts its own worker on it (the XSS one pointed at a test
search server, the model-failure one live, with a wrong key, at a Realtime endpoint that refuses it),
so no two workers ever compete for the same rooms. The plumbing is in browser.py.

Accessibility is checked with axe-core (the page's devDependency, evaluated in the page by the scripts):
every rule it runs by default, WCAG A/AA and its best practices, must pass on the first screen, with
cards, and after Stop.
"""

from __future__ import annotations

import re
import secrets
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.devstack.stack import Stack, StackOptions
from agent.voice.assistant import RESUME_LINE
from realtime_standin import GREETING as STANDIN_GREETING
from tests import constitution
from tests.mcp_fixture import FakeMcpBehaviour, synthetic_source

from .browser import (
    ARTIFACTS,
    LOG_TAIL_LINES,
    TONE_AT_S,
    TONE_S,
    BrowserStack,
    LogWindow,
    ScriptRun,
    conversation_in_progress,
    error_lines,
    free_ports,
    realtime_endpoint,
    require_browser_tools,
    run_script,
    search_server,
    tracebacks,
    write_wav,
)
from .conftest import _save_index, _seed_index, livekit_port, log_tails, take_livekit_down

pytestmark = pytest.mark.e2e

READY_STATES = {"escuchando", "hablando", "en espera", "pensando"}
TOOL_DURATION = re.compile(r"^Tiempo de la herramienta: (\d+ ms|\d+,\d s)$")

# Markup that would run if the page ever rendered evidence as HTML: `src=x` fails to load at once,
# so `onerror` fires as soon as such an element exists.
PAYLOAD = '<img src=x onerror="window.__xss=1">'


@pytest.fixture(scope="module")
def browser_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserStack]:
    require_browser_tools()
    base = tmp_path_factory.mktemp("lexvoz-browser")
    (base / "data").mkdir()
    save_to = _seed_index(request.config, base / "data")  # the e2e modules' built index, when one is cached
    lk_port = livekit_port(18_880)
    search_port, web_port, standin_port = free_ports(3, avoid={lk_port, lk_port + 1})
    options = StackOptions(
        livekit_port=lk_port,
        search_port=search_port,
        web_port=web_port,
        standin_port=standin_port,
        rehearsal=True,
        source=constitution.require(),  # the search server builds its index from it when none was cached
        data_dir=base / "data",
        log_dir=base / "log" / "stack",
        ledger_path=base / "ledger.sqlite3",
        start_worker=False,
        worker_args=["--dev"],
        # Every test of this module opens its sessions from 127.0.0.1 through this one page service, one after
        # another: the per-client caps (10 sessions a minute, a few unjoined at once) would turn the later tests
        # away whenever the earlier ones run quickly. Those caps are tested where they are the subject
        # (tests/test_web_limits.py, tests/journey/test_behind_proxy.py), not here.
        web_env={"LEXVOZ_TOKEN_REQUESTS_PER_MINUTE": "200", "LEXVOZ_MAX_PENDING_SESSIONS_PER_CLIENT": "50"},
    )
    stack = Stack(options)
    try:
        stack.start()
    except Exception as exc:  # Stack.start has already stopped what it started
        pytest.fail(f"the Lexvoz stack did not start: {exc}\n{log_tails(base / 'log', LOG_TAIL_LINES)}", pytrace=False)
    if save_to is not None:
        _save_index(base / "data", save_to)
    ARTIFACTS.mkdir(exist_ok=True)
    running = BrowserStack(
        stack=stack,
        base=base,
        tone_wav=write_wav(base / "microfono-tono.wav", tone=True),
        silent_wav=write_wav(base / "microfono-silencio.wav", tone=False),
    )
    try:
        yield running
    finally:
        stack.stop()


# --------------------------------------------------------------------------------------------------
# a whole session on the embedded Constitution


# How long after Stop the worker's log is still watched for tracebacks: the worker's side of a Stop (the
# room closing, the job ending) takes a moment. A bounded look, since no event marks a traceback's absence.
AFTER_STOP_S = 5.0

# What the page says about where the voice goes (web/src/PrivacyNotice.tsx), written out so that a change
# to a sentence shows up here.
VOICE_TO_OPENAI = "Su voz y lo que escriba se envían a OpenAI para transcribirlos y responder."
VOICE_TO_SIMULATOR = (
    "Este sitio está en modo de ensayo: su voz y lo que escriba van a un simulador local en este servidor, no a OpenAI."
)


@dataclass(frozen=True)
class Session:
    run: ScriptRun
    worker_log: str  # what the worker logged from the script's start until AFTER_STOP_S after its Stop


@pytest.fixture(scope="module")
def session(browser_stack: BrowserStack) -> Session:
    """One session, shared by the tests below: each asserts a different promise about the same run."""
    with browser_stack.worker("constitucion", warm=True):
        window = LogWindow(browser_stack.worker_log("constitucion"))
        run = run_script(
            browser_stack,
            "session.mjs",
            browser_stack.tone_wav,
            {"LEXVOZ_E2E_TONE_AT_MS": str(int(TONE_AT_S * 1000)), "LEXVOZ_E2E_TONE_MS": str(int(TONE_S * 1000))},
        )
        stopped_at = run.result.get("stoppedAt")
        if isinstance(stopped_at, (int, float)):
            time.sleep(max(0.0, stopped_at / 1000 + AFTER_STOP_S - time.time()))
        worker_log = window.read()
    return Session(run, worker_log)


@pytest.fixture(scope="module")
def session_run(session: Session) -> ScriptRun:
    return session.run


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
        why_not = "it was speaking through it" if r["voice"].get("agentSpoke") else "too close to it"
        warnings.warn(
            f"the spoken turn was not checked: the agent was listening {r['readyMs']} ms after Start and the "
            f"microphone's burst came at {TONE_AT_S:.0f} s: {why_not}",
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


def test_stop_leaves_no_traceback_in_the_worker_log(session: Session, browser_stack: BrowserStack) -> None:
    """From Start until a few seconds after «Detener», the worker logs no traceback: a person ending the
    conversation is the normal way it ends, not an error. Each offending traceback is named by its record."""
    assert session.run.passed, session.run.explain(browser_stack)
    assert session.worker_log, "the worker logged nothing during the session"
    found = tracebacks(session.worker_log)
    assert found == [], "tracebacks in the worker log between Start and after Stop:\n" + "\n".join(found)


# A stretch of worker log as the worker writes it (colour codes included): one clean record, then a
# WARNING whose traceback must be found and named by its record and its exception.
WORKER_LOG_WITH_A_TRACEBACK = """\
2026-12-02 01:30:32,405 - \x1b[32mINFO\x1b[0m livekit.agents - closing agent session \x1b[90m{"room": "r"}\x1b[0m
2026-12-02 01:30:32,419 - \x1b[33mWARNING\x1b[0m livekit.agents - error while closing the session \x1b[90m{}\x1b[0m
Traceback (most recent call last):
  File "/x/agent_session.py", line 10, in aclose
    await self._activity.drain()
RuntimeError: the room is already closed
2026-12-02 01:30:32,439 - \x1b[32mINFO\x1b[0m lexvoz.gateway - MCP session closed: job shutdown
"""


def test_worker_log_tracebacks_are_found_and_named() -> None:
    """The traceback check above can fail: a traceback in the worker's log format is found, and named by the
    record it belongs to and the exception it ends with; a log without one yields nothing."""
    found = tracebacks(WORKER_LOG_WITH_A_TRACEBACK)
    assert found == [
        "2026-12-02 01:30:32,419 - WARNING livekit.agents - error while closing the session {} "
        "-> RuntimeError: the room is already closed"
    ], found
    assert tracebacks(WORKER_LOG_WITH_A_TRACEBACK.split("Traceback")[0]) == []


def test_axe_finds_no_violations_on_the_first_screen_with_cards_and_after_stop(
    session_run: ScriptRun, browser_stack: BrowserStack
) -> None:
    """axe-core, all its default rules: nothing on the first screen, on the page with source cards, or after Stop
    (the transcript is a log wrapping a real list; headings go h2 panel, h3 search, h4 source)."""
    assert session_run.passed, session_run.explain(browser_stack)
    r = session_run.result
    assert r["firstScreen"]["axe"] == [], r["firstScreen"]["axe"]
    assert r["axeWithCards"] == [], r["axeWithCards"]
    assert r["axeAfterStop"] == [], r["axeAfterStop"]


def test_a_search_is_announced_in_one_short_line(session_run: ScriptRun, browser_stack: BrowserStack) -> None:
    """The research panel's only live region says "N fuentes encontradas" for the search, not its excerpts."""
    assert session_run.passed, session_run.explain(browser_stack)
    r = session_run.result
    n = len(r["cards"])
    assert r["announcement"] == (f"{n} fuentes encontradas" if n > 1 else "1 fuente encontrada"), r["announcement"]
    assert r["announced"] == [r["announcement"]], r["announced"]  # one region, and it holds only that line
    assert r["panelChars"] > 10 * len(r["announcement"]), r["panelChars"]  # what is no longer read out


def test_focus_ring_and_chat_box_border_reach_3_to_1(session_run: ScriptRun, browser_stack: BrowserStack) -> None:
    """The keyboard focus ring (on «Empezar», reached with Tab) and the chat box's border stand out 3:1 or more
    from what is behind them (WCAG 1.4.11)."""
    assert session_run.passed, session_run.explain(browser_stack)
    first = session_run.result["firstScreen"]
    assert first["focused"] == "start-button", first
    assert first["focusRingStyle"] == "solid", first
    assert first["focusRing"]["ratio"] >= 3.0, first["focusRing"]
    border = session_run.result["chatBorder"]
    assert border["ratio"] >= 3.0, border


def test_cards_of_an_ended_conversation_are_kept_and_set_apart(
    session_run: ScriptRun, browser_stack: BrowserStack
) -> None:
    """After «Detener» the sources stay readable, under a notice that they are the previous conversation's (and
    go at the next Start), drawn apart; and nothing is announced about them again."""
    assert session_run.passed, session_run.explain(browser_stack)
    r = session_run.result
    assert r["cardsAfterStop"] == r["cardsBeforeStop"] >= len(r["cards"]) > 0, r
    assert r["endedNotice"] == "Fuentes de la conversación anterior. Se borrarán al pulsar «Empezar».", r
    assert r["endedStyle"] == "dashed", r
    assert r["announcedAfterStop"] == [""], r["announcedAfterStop"]


def test_the_privacy_notice_says_where_the_voice_goes(session_run: ScriptRun, browser_stack: BrowserStack) -> None:
    """A rehearsal site's first screen, before the microphone opens and before any agent has joined, says the
    voice goes to this server's simulator, not OpenAI (the page service names its mode, GET /api/config); so
    does the notice after Stop, once the rehearsal agent has said so itself."""
    assert session_run.passed, session_run.explain(browser_stack)
    r = session_run.result
    before = r["firstScreen"]["privacy"]
    assert before == VOICE_TO_SIMULATOR, before
    assert r["privacyAfterStop"] == VOICE_TO_SIMULATOR, r["privacyAfterStop"]


# --------------------------------------------------------------------------------------------------
# a phone held upright, with reduced motion: interruptions, new sources out of sight, no motion

NEW_SOURCES = re.compile(r"^(\d+) fuentes? nuevas?$")
PEEK_PX = 80  # web/src/newSources.ts: the bottom band of the window where a list's edge does not count as seen


@pytest.fixture(scope="module")
def narrow_run(browser_stack: BrowserStack) -> ScriptRun:
    """One session at 390 px with prefers-reduced-motion, shared by the tests below."""
    with browser_stack.worker("telefono"):
        return run_script(browser_stack, "narrow.mjs", browser_stack.silent_wav)


def test_a_cut_off_agent_line_is_marked_interrupted(narrow_run: ScriptRun, browser_stack: BrowserStack) -> None:
    """Typing a question while the agent reads sources back cuts it off: its line keeps what was said and ends
    with "… (interrumpido)", as text a screen reader reads; the greeting and the next answer carry no mark."""
    why = narrow_run.explain(browser_stack)
    assert narrow_run.passed, why
    narrow_run.warn_if_retried()
    r = narrow_run.result
    cut = r["cutLine"]
    assert cut["interrupted"] == " … (interrumpido)", why
    assert r["saidBeforeCut"] and cut["text"].startswith(r["saidBeforeCut"].strip()[:4]), why
    assert r["cutRole"] and r["cutRole"]["text"].endswith("(interrumpido)") and not r["cutRole"]["hidden"], why
    marked = [line for line in r["transcript"] if line["interrupted"]]
    assert marked == [cut], why  # the greeting and the second answer finished: no mark on them
    assert not r["secondReply"]["interim"] and r["secondReply"]["text"].startswith("Modo de ensayo."), why


def test_new_sources_out_of_sight_are_announced_near_the_chat(
    narrow_run: ScriptRun, browser_stack: BrowserStack
) -> None:
    """At 390 px the panel is below the conversation: when sources arrive there, a notice near the chat, on
    screen, counts them; pressing it scrolls to the newest search, moves focus there, and goes away."""
    why = narrow_run.explain(browser_stack)
    assert narrow_run.passed, why
    r = narrow_run.result
    assert r["noticeShown"] and r["listAtNotice"], why
    # The searches were out of sight: at most their top edge peeking into the window's bottom band, which the
    # page does not count as seen (web/src/newSources.ts, PEEK_PX).
    assert r["listAtNotice"]["top"] > r["listAtNotice"]["viewport"] - PEEK_PX, why
    notice = r["noticeAt"]
    assert 0 <= notice["top"] and notice["bottom"] <= notice["viewport"], why  # the notice was on screen
    assert 0 <= r["chatAt"]["top"] - notice["bottom"] < 100, why  # ... just above the chat box, not over it
    assert (m := NEW_SOURCES.match(r["noticeText"])) and int(m.group(1)) == r["cardsOfFirst"], why
    before_tap = NEW_SOURCES.match(r["noticeTextBeforeTap"] or "")
    assert before_tap and int(before_tap.group(1)) == r["unseenCards"], why
    newest = r["newestAt"]
    assert 0 <= newest["top"] < newest["viewport"], why  # scrolled to
    assert r["focusedQuery"] and "nacionalidad" in r["focusedQuery"], why
    assert Path(r["screenshot"]).is_file(), why


def test_reduced_motion_stops_the_visualiser_and_animations(narrow_run: ScriptRun, browser_stack: BrowserStack) -> None:
    """With prefers-reduced-motion (Chromium's emulation), nothing moves while the agent speaks: no audio bars,
    no running animation or transition."""
    why = narrow_run.explain(browser_stack)
    assert narrow_run.passed, why
    motion = narrow_run.result["motion"]
    assert motion["reduceMatches"] is True, why
    assert motion["slotDisplay"] == "none" and motion["maxBars"] == 0, why
    assert motion["maxAnimations"] == 0, why


# --------------------------------------------------------------------------------------------------
# evidence is text, never markup


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

    with search_server(behaviour) as server:
        env = {"LEXVOZ_MCP_URL": server.url, "LEXVOZ_MCP_TOKEN": token}
        with browser_stack.worker("busqueda-hostil", env):
            run = run_script(browser_stack, "xss.mjs", browser_stack.silent_wav, {"LEXVOZ_E2E_PAYLOAD": PAYLOAD})
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


# --------------------------------------------------------------------------------------------------
# a voice model that refuses the agent


# What the page must say when the Realtime endpoint rejects the key (web/src/failures.ts, `invalid_key`),
# written out here so that a change to the page's sentence shows up as a failure.
REJECTED_KEY_MESSAGE = "El servicio de voz rechazó la clave configurada; avise al administrador."
HANDSHAKES_PER_JOB = 4  # the first handshake and the OpenAI plugin's three retries
# model_failure.mjs waits up to 75 s per Start for the message (35 s seen with the machine's load at
# 15 on 2 cores) and tries Start at most 3 times when no agent joins.
FAILURE_WITHIN_MS = 75_000
FAILURE_SCRIPT_TIMEOUT_S = 3 * FAILURE_WITHIN_MS / 1000 + 60


def test_a_rejected_voice_key_is_said_on_the_page(browser_stack: BrowserStack) -> None:
    """A live worker whose key the Realtime endpoint refuses (HTTP 401): the page says so in Spanish,
    gives the Start button back and never shows a listening agent; the operator gets one error line."""
    wrong_key = f"sk-proj-wrong-{secrets.token_hex(16)}"
    with realtime_endpoint(refuse=401) as endpoint:
        env = {"LEXVOZ_REHEARSAL": "0", "OPENAI_API_KEY": wrong_key, "OPENAI_BASE_URL": endpoint.base_url}
        with browser_stack.worker("clave-rechazada", env):
            run = run_script(
                browser_stack,
                "model_failure.mjs",
                browser_stack.silent_wav,
                {
                    "LEXVOZ_E2E_EXPECT_MESSAGE": REJECTED_KEY_MESSAGE,
                    "LEXVOZ_E2E_FAILURE_WITHIN_MS": str(FAILURE_WITHIN_MS),
                },
                timeout_s=FAILURE_SCRIPT_TIMEOUT_S,
            )
        handshakes = endpoint.handshakes

    why = run.explain(browser_stack)
    assert run.passed, why
    run.warn_if_retried()
    r = run.result
    assert r["message"] == REJECTED_KEY_MESSAGE, why
    assert r["startEnabled"] is True and r["stateAfterFailure"] == "inactivo", why
    # The agent said it runs live (`lexvoz.mode`) before its model failed: the privacy notice names OpenAI.
    assert r["privacyAfterFailure"] == VOICE_TO_OPENAI, why
    assert "escuchando" not in r["agentStates"] and not READY_STATES & set(r["agentStates"]), why
    assert r["pageErrors"] == [], why
    # The refusal came from this endpoint, once per job: the plugin's retries, then the failure.
    assert handshakes == HANDSHAKES_PER_JOB, f"the endpoint saw {handshakes} handshakes\n{why}"

    # The operator: one error line, naming the setting to fix and the status, never the key itself.
    log = browser_stack.worker_log("clave-rechazada")
    errors = error_lines(log)
    assert len(errors) == 1, f"ERROR lines in the worker log: {errors}\n{why}"
    assert "OPENAI_API_KEY" in errors[0] and "cause=invalid_key" in errors[0] and "HTTP 401" in errors[0], errors
    for path in browser_stack.log_root.rglob("*.log"):
        assert wrong_key not in path.read_text(errors="replace"), f"the key is written in {path}"


# --------------------------------------------------------------------------------------------------
# every agent busy: the page waits for one, says so, and is served when one frees

WAITING_MESSAGE = (  # web/src/agentRequest.ts, written out so that a change to the sentence shows up here
    "Ningún agente está libre en este momento. Le atenderemos en cuanto uno quede libre; puede esperar aquí."
)
SERVED_WITHIN_MS = 120_000


def test_a_person_who_finds_every_agent_busy_is_told_and_then_served(browser_stack: BrowserStack) -> None:
    """A worker that takes one conversation, already taken: the page says no agent is free and keeps
    asking; when the other conversation ends, an agent joins this page's room and answers with sources."""
    signal_file = browser_stack.base / "waiting-shown"
    with (
        browser_stack.worker("ocupado", {"LEXVOZ_MAX_JOBS": "1"}),
        conversation_in_progress(browser_stack.stack.web_url) as leave,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        script = pool.submit(
            run_script,
            browser_stack,
            "waiting.mjs",
            browser_stack.silent_wav,
            {"LEXVOZ_E2E_SIGNAL_FILE": str(signal_file), "LEXVOZ_E2E_SERVED_WITHIN_MS": str(SERVED_WITHIN_MS)},
        )
        deadline = time.monotonic() + 60
        while not signal_file.exists() and not script.done() and time.monotonic() < deadline:
            time.sleep(0.2)  # the browser writes the file when the notice shows; nothing to wake on here
        leave()  # the other person hangs up: the worker's one slot frees
        run = script.result()

    why = run.explain(browser_stack)
    assert run.passed, why
    r = run.result
    assert r["waitingText"] == WAITING_MESSAGE and r["waitingRole"] == "status", why
    assert r["stateWhileWaiting"] not in READY_STATES, why
    assert r["state"] in READY_STATES and not r["noticeAfterJoin"] and not r["gaveUp"], why
    assert any("artículo 7" in c for c in r["citations"]), why
    assert r["stateAfterStop"] == "inactivo", why
    assert r["pageErrors"] == [], why
    # The page service dispatched the agent again for this room (logged by room, never by token).
    web_log = (browser_stack.log_root / "stack" / "web.log").read_text(errors="replace")
    assert "agent requested again room=lexvoz-" in web_log, why


# --------------------------------------------------------------------------------------------------
# livekit-server restarts mid-conversation: the page joins its room again, and is not greeted again

REJOINING_MESSAGE = "Se perdió la conexión con el servidor de voz. Reconectando…"  # web/src/App.tsx


def livekit_server_down_mid_conversation(
    browser_stack: BrowserStack, script_name: str, env: dict[str, str], *, kill: bool, worker: str
) -> ScriptRun:
    """Run `script_name` (which writes LEXVOZ_E2E_SIGNAL_FILE once the agent has greeted and listens) and, at that
    signal, take livekit-server down and up again (`take_livekit_down`: stopped, or killed with `kill`)."""
    signal_file = browser_stack.base / f"greeted-{script_name}"
    with browser_stack.worker(worker), ThreadPoolExecutor(max_workers=1) as pool:
        env = {"LEXVOZ_E2E_SIGNAL_FILE": str(signal_file), **env}
        script = pool.submit(run_script, browser_stack, script_name, browser_stack.silent_wav, env)
        deadline = time.monotonic() + 120
        while not signal_file.exists() and not script.done() and time.monotonic() < deadline:
            time.sleep(0.2)  # the browser writes the file once the greeting shows
        if signal_file.exists():
            take_livekit_down(browser_stack.stack, kill=kill)
        return script.result()


def test_a_livekit_server_restart_mid_conversation_is_rejoined_without_a_new_start(
    browser_stack: BrowserStack,
) -> None:
    """livekit-server stops under a greeted conversation and starts again 2 s later. livekit-client reports the
    shutdown and does not reconnect by itself; the page says it is reconnecting, joins the same room with its
    resume token once livekit-server answers, and the new agent (the token dispatches it when the room is made
    again) says its short line, not the greeting. The person never presses Start, keeps the transcript so far on
    the page, and is answered with sources.
    (An agent replaced in the same room, its process killed, is the same hello: tests/e2e/test_heartbeat_e2e.py.)"""
    run = livekit_server_down_mid_conversation(
        browser_stack, "restart.mjs", {"LEXVOZ_E2E_SERVED_WITHIN_MS": "90000"}, kill=False, worker="reinicio"
    )

    why = run.explain(browser_stack)
    assert run.passed, why
    r = run.result
    assert r["greeting"] == STANDIN_GREETING, why
    if r["noticeText"] is not None:  # None: the shutdown did not reach the page, which reconnected by itself
        assert (r["noticeText"], r["noticeRole"]) == (REJOINING_MESSAGE, "status"), why
    if r["line"] is None:  # the old agent came back by its own reconnect, listening with its conversation
        log = browser_stack.worker_log("reinicio").read_text(encoding="utf-8", errors="replace")
        assert "restarting connection" in log or "resuming connection" in log, why
    else:
        assert r["line"] == RESUME_LINE, why
    assert r["kept"] == [STANDIN_GREETING], why  # the earlier room's lines stay on the page
    assert not r["noticeAfter"], why
    assert STANDIN_GREETING not in r["agentLinesAfter"], why
    assert any("artículo 7" in c for c in r["citations"]), why
    assert r["stateAfterStop"] == "inactivo", why
    assert r["pageErrors"] == [], why


def test_a_livekit_server_killed_mid_conversation_comes_back_without_a_new_start(
    browser_stack: BrowserStack,
) -> None:
    """livekit-server is killed (SIGKILL: it tells nobody, as an out-of-memory kill) under a greeted conversation and
    started again 2 s later. No SERVER_SHUTDOWN reaches anyone: livekit-client reconnects the page by itself (the
    page shows the agent connecting, then listening), and the agent's own connection reconnects too, so the same
    agent is back with its conversation and says nothing new. The person never presses Start, is not greeted again,
    and a question typed after the restart is answered with sources."""
    run = livekit_server_down_mid_conversation(
        browser_stack, "crash.mjs", {"LEXVOZ_E2E_WATCH_MS": "20000"}, kill=True, worker="caida"
    )

    why = run.explain(browser_stack)
    assert run.passed, why
    r = run.result
    assert r["seen"][-1]["shown"] == "escuchando|", why  # back to listening, with no message to the person
    assert STANDIN_GREETING not in r["agentLinesAfter"], why
    assert any("artículo 7" in c for c in r["citations"]), why
    assert r["stateAfterStop"] == "inactivo", why
    assert r["pageErrors"] == [], why
