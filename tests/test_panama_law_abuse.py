"""The search server against a hostile client: a query that normalisation makes huge is refused before any search,
one slow search does not hold other clients' calls, cancelled calls never run more searches than the limit, and
`serve` neither starts unauthenticated on a non-loopback address nor answers a Host it was not told about.

Searches here are fakes that block on an event, so what is pinned is an order of events, never a duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.mcp.errors import GatewayError
from agent.mcp.gateway import GatewayOptions, McpGateway
from panama_law.contract import INPUT_SCHEMA
from panama_law.serve import server as server_module
from panama_law.serve.schema import MAX_NORMALISED_CHARS, MAX_QUERY_TOKENS, QueryError, check_query_size
from panama_law.serve.server import ServerState
from tests.ports import free_port
from tests.search_server import serving_state

TOKEN = "token-de-prueba-abuso"
REPO_ROOT = Path(__file__).resolve().parents[1]
EVAL_DIR = REPO_ROOT / "bench" / "eval"
GROWS_18_FOLD = "\ufdfa" * 2000  # one character, 18 once NFKC-normalised: 36,000 in all
BLOCK_S = 10.0  # how long a blocked fake search waits at most for its release (a safety net, never the test's pass)


class _Recording:
    """A searcher that records the queries it is asked and finds nothing; `slow` blocks until `release` is set."""

    article_count = 0

    def __init__(self, slow: str | None = None) -> None:
        self.slow = slow
        self.queries: list[str] = []
        self.running = 0
        self.most_running = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        self.slow_done = threading.Event()
        self._lock = threading.Lock()

    def search(self, query: str) -> list[Any]:
        with self._lock:
            self.queries.append(query)
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            if query == self.slow:
                self.entered.set()
                self.release.wait(BLOCK_S)
                self.slow_done.set()
            return []
        finally:
            with self._lock:
                self.running -= 1


@contextlib.contextmanager
def _serving(state: ServerState, **options: Any) -> Iterator[str]:
    with serving_state(state, token=TOKEN, **options) as base:
        yield f"{base}/mcp"


def _state(searcher: _Recording) -> ServerState:
    state = ServerState()
    state.set(searcher)  # type: ignore[arg-type]
    return state


def _longest_eval_question() -> str:
    questions: list[str] = [
        json.loads(line)["question"]
        for path in sorted(EVAL_DIR.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    return max(questions, key=len)


def test_the_size_bounds_leave_every_real_question_and_keep_the_contract() -> None:
    check_query_size(_longest_eval_question())  # the longest of the evaluation sets passes
    assert INPUT_SCHEMA["properties"]["query"]["maxLength"] == MAX_NORMALISED_CHARS == 2000
    with pytest.raises(QueryError, match="once normalised"):
        check_query_size(GROWS_18_FOLD)
    with pytest.raises(QueryError, match=f"more than {MAX_QUERY_TOKENS} tokens"):
        check_query_size("ab " * 600)  # 1,800 characters, far more tokens


@pytest.mark.parametrize(
    ("query", "said"),
    [(GROWS_18_FOLD, "once normalised"), ("ab " * 600, "tokens")],
    ids=["normalises-to-36000-characters", "too-many-tokens"],
)
async def test_a_query_too_long_once_normalised_is_a_tool_error_and_no_search_runs(query: str, said: str) -> None:
    searcher = _Recording()
    with _serving(_state(searcher)) as url:
        gw = McpGateway(GatewayOptions(url=url, token=TOKEN))
        try:
            with pytest.raises(GatewayError) as info:
                await gw.search({"query": query})
            assert (await gw.search({"query": "derecho de huelga"})).sources == []
        finally:
            await gw.aclose()
    assert info.value.reason == "tool_error"
    assert info.value.server_text is not None and said in info.value.server_text
    assert searcher.queries == ["derecho de huelga"]  # the refused query was never searched


async def test_a_slow_search_does_not_hold_another_clients_call() -> None:
    slow = _Recording(slow="una pregunta lenta")
    state = _state(slow)
    with _serving(state) as url:
        first = McpGateway(GatewayOptions(url=url, token=TOKEN))
        second = McpGateway(GatewayOptions(url=url, token=TOKEN))
        try:
            held = asyncio.create_task(first.search({"query": "una pregunta lenta"}))
            assert await asyncio.to_thread(slow.entered.wait, BLOCK_S), "the slow search never started"
            # The index is swapped while the slow search runs: that call keeps the searcher it started with.
            later = _Recording()
            state.set(later)  # type: ignore[arg-type]
            assert (await second.search({"query": "otra pregunta"})).sources == []
            assert not slow.slow_done.is_set(), "the other client was answered only after the slow search ended"
            slow.release.set()
            assert (await held).sources == []
        finally:
            slow.release.set()
            await first.aclose()
            await second.aclose()
    assert slow.queries == ["una pregunta lenta"]
    assert later.queries == ["otra pregunta"]


async def test_cancelled_calls_never_run_more_searches_than_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = _Recording(slow="bloqueada")
    waiting = 5
    cancelled = threading.Semaphore(0)
    arrived = threading.Semaphore(0)  # a call checked and about to wait for its turn to search

    def check_and_count(query: str) -> None:
        check_query_size(query)
        arrived.release()

    monkeypatch.setattr(server_module, "check_query_size", check_and_count)

    class _Cancellations(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "tool call cancelled":
                cancelled.release()

    watch = _Cancellations()
    server_log = logging.getLogger("panama_law.serve.server")
    server_log.addHandler(watch)
    server_log.setLevel(logging.INFO)
    with _serving(_state(blocked), search_threads=1) as url:
        gateways = [McpGateway(GatewayOptions(url=url, token=TOKEN)) for _ in range(waiting + 2)]
        try:
            for gw in gateways:
                await gw.connect()
            tasks = [asyncio.create_task(gateways[0].search({"query": "bloqueada"}))]
            assert await asyncio.to_thread(blocked.entered.wait, BLOCK_S), "the first search never started"
            tasks += [
                asyncio.create_task(gw.search({"query": f"en espera {n}"})) for n, gw in enumerate(gateways[1:-1])
            ]
            for _ in range(1 + waiting):
                assert await asyncio.to_thread(arrived.acquire, True, BLOCK_S), "a call never reached the server"
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            # The server has dropped every waiting call (the running search cannot be interrupted: it finishes).
            for _ in range(waiting):
                assert await asyncio.to_thread(cancelled.acquire, True, BLOCK_S), "a waiting call was not cancelled"
            blocked.release.set()
            assert (await gateways[-1].search({"query": "después"})).sources == []
        finally:
            blocked.release.set()
            server_log.removeHandler(watch)
            for gw in gateways:
                await gw.aclose()
    assert blocked.most_running == 1
    assert blocked.queries == ["bloqueada", "después"]  # cancelled while waiting: never searched


def _serve_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PANAMA_LAW_")}
    return {**env, **extra}


def test_serve_refuses_a_non_loopback_address_without_a_token(tmp_path: Path) -> None:
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "panama_law", "serve", "--host", "0.0.0.0", "--port", str(port)],
        cwd=REPO_ROOT,
        env=_serve_env(PANAMA_LAW_DATA_DIR=str(tmp_path), PANAMA_LAW_SOURCE=str(tmp_path / "absent.json")),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: refusing to serve on 0.0.0.0 without a token"), lines
    assert not list(tmp_path.iterdir())  # nothing was built or recorded: it stopped before serving


def test_serve_on_every_address_answers_only_the_hosts_it_was_given(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    env = _serve_env(
        PANAMA_LAW_TOKEN=TOKEN,
        PANAMA_LAW_ALLOWED_HOSTS="search",
        PANAMA_LAW_SOURCE=str(tmp_path / "absent.json"),  # no index: MCP still answers, health says 503
        PANAMA_LAW_DATA_DIR=str(tmp_path / "data"),
    )
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "panama_law", "serve", "--host", "0.0.0.0", "--port", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{base}/healthz", timeout=2)
                break
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)

        def initialize(host: str) -> int:
            headers = {
                "Host": host,
                "Authorization": f"Bearer {TOKEN}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            }
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
            return httpx.post(f"{base}/mcp", json=body, headers=headers, timeout=10).status_code

        assert initialize(f"rebound.example:{port}") == 421
        assert initialize(f"search:{port}") == 200
        assert initialize(f"127.0.0.1:{port}") == 200
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def test_allowed_hosts_are_the_loopback_names_a_specific_bind_address_and_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from panama_law.settings import ServerSettings

    for name in ("PANAMA_LAW_HOST", "PANAMA_LAW_ALLOWED_HOSTS", "PANAMA_LAW_SEARCH_THREADS"):
        monkeypatch.delenv(name, raising=False)
    assert ServerSettings().allowed_host_names == ("localhost", "127.0.0.1", "::1")
    assert ServerSettings(host="0.0.0.0").allowed_host_names == ("localhost", "127.0.0.1", "::1")
    assert ServerSettings(host="10.1.2.3").allowed_host_names[-1] == "10.1.2.3"
    monkeypatch.setenv("PANAMA_LAW_ALLOWED_HOSTS", "search, [FD00::5]")
    monkeypatch.setenv("PANAMA_LAW_SEARCH_THREADS", "3")
    settings = ServerSettings(host="0.0.0.0")
    assert settings.allowed_host_names == ("localhost", "127.0.0.1", "::1", "search", "fd00::5")
    assert settings.search_threads == 3 and not settings.is_loopback
    assert ServerSettings(host="127.0.0.2").is_loopback
