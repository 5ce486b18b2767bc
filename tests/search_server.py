"""The embedded search server run in-process for tests: uvicorn in a thread on a free loopback port."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from panama_law.retrieve.search import Searcher
from panama_law.serve.server import ServerState, build_app
from tests.ports import free_port

SERVER_TOKEN = "token-de-prueba-sintetico"
"""The bearer token of the search server the tests start (synthetic, loopback only)."""


@contextlib.contextmanager
def serving(searcher: Searcher, *, token: str | None = SERVER_TOKEN) -> Iterator[str]:
    """Serve `searcher` until the block ends; yields the base URL (the MCP endpoint is at `/mcp`)."""
    state = ServerState()
    state.set(searcher)
    with serving_state(state, token=token) as base:
        yield base


@contextlib.contextmanager
def serving_state(state: ServerState, *, token: str | None = SERVER_TOKEN, **options: Any) -> Iterator[str]:
    """Serve `state` with `build_app`'s other `options` until the block ends; yields the base URL."""
    port = free_port()
    app = build_app(state, token=token, **options)
    uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:
        if time.monotonic() > deadline:
            raise RuntimeError("test search server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
