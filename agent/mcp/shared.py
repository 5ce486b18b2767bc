"""One MCP session per worker process, whichever executor runs the jobs.

With livekit-agents' thread executor every job runs on its own thread with its own event loop, in one
process. A gateway (its aiohttp/anyio streams, its locks) belongs to the loop it was first used on, so it
cannot simply be shared between jobs; and one MCP session per conversation would exhaust the search
server's per-client session limit long before the worker is full. So the process keeps one `McpGateway`
on a small event loop thread of its own, and every conversation calls it through `SharedGateway`,
which hands each call to that loop and awaits the result on the caller's loop.

Cancelling the caller (a barge-in) cancels the call on the gateway's loop, so the MCP SDK still sends
`notifications/cancelled`; context variables (the current trace span) travel with the call. The session
is closed (a DELETE to the server) when the last conversation that uses it releases it, and opened again
lazily by the next one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from mcp import types

from agent.contract import TOOL_NAME
from agent.mcp.gateway import GatewayOptions, McpGateway, SearchResult

logger = logging.getLogger("lexvoz.gateway")

T = TypeVar("T")


class SharedGateway:
    """A process-wide `McpGateway` on its own loop thread, usable from any event loop in the process."""

    def __init__(self, options: GatewayOptions) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="lexvoz-mcp", daemon=True)
        self._thread.start()
        self.gateway = McpGateway(options)
        self._users = 0
        self._lock = threading.Lock()

    @property
    def options(self) -> GatewayOptions:
        return self.gateway.options

    @property
    def connected(self) -> bool:
        return self.gateway.connected

    @property
    def server_info(self) -> types.Implementation | None:
        """The server's name and version from the handshake (for the ledger); None before the first connect."""
        return self.gateway.server_info

    @property
    def users(self) -> int:
        """Conversations currently holding the session."""
        return self._users

    def query_as_sent(self, arguments: Any) -> str:
        return self.gateway.query_as_sent(arguments)

    async def search(self, arguments: Any, *, tool_name: str = TOOL_NAME) -> SearchResult:
        return await self._call(self.gateway.search(arguments, tool_name=tool_name))

    async def connect(self) -> types.Tool:
        return await self._call(self.gateway.connect())

    def acquire(self) -> None:
        """A conversation starts using the session."""
        with self._lock:
            self._users += 1

    async def release(self, reason: str) -> None:
        """A conversation is done with the session; the last one out closes it (a DELETE to the server)."""
        with self._lock:
            self._users = max(0, self._users - 1)
            last = self._users == 0
        if last:
            await self._call(self.gateway.aclose(reason))

    async def aclose(self, reason: str = "worker shutdown") -> None:
        """Close the session and stop the loop thread; the object cannot be used afterwards."""
        if self._loop.is_closed():
            return
        try:
            await self._call(self.gateway.aclose(reason))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            await asyncio.to_thread(self._thread.join, 5)
            if not self._thread.is_alive():
                self._loop.close()

    async def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the gateway's loop; cancelling the caller cancels it there too."""
        if self._loop.is_closed() or not self._loop.is_running():
            coro.close()
            raise RuntimeError("the shared MCP gateway is closed")
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))


_shared: SharedGateway | None = None
_shared_lock = threading.Lock()


def process_gateway(options: GatewayOptions) -> SharedGateway:
    """The process's one shared gateway, created on first use (from any thread)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = SharedGateway(options)
        return _shared


async def close_process_gateway(reason: str = "worker shutdown") -> None:
    """Close and forget the process's gateway (tests, and a worker that is going away)."""
    global _shared
    with _shared_lock:
        shared, _shared = _shared, None
    if shared is not None:
        await shared.aclose(reason)
