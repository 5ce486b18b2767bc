"""A real `mcp` SDK server over streamable HTTP, with knobs for the faults the gateway must survive.

Test-only. The MCP part is the SDK's own low-level server; an ASGI wrapper in front of it injects
HTTP-level faults (401, 5xx, dropped connections) and counts what reached the server, so tests can
assert on the wire ("exactly one request", "the server saw the cancellation").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from agent.contract import INPUT_SCHEMA, OUTPUT_SCHEMA, TOOL_NAME

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def synthetic_source(n: int = 1, **extra: Any) -> dict[str, Any]:
    """A visibly synthetic source; never real law."""
    src: dict[str, Any] = {
        "title": f"Ley Sintética de Prueba, título {n}",
        "citation": f"Ley Sintética de Prueba, artículo {n}",
        "excerpt": f"Texto sintético número {n} para pruebas del gateway.",
    }
    src.update(extra)
    return src


@dataclass(frozen=True)
class CallWatch:
    """One tools/call handler invocation, watched from before it starts.

    Fresh events per call, set only by that call: a test that waits on `started` cannot be woken by an
    earlier call of the same test, which a server-wide event, once set, would do at once (on Python
    3.12+ `asyncio.wait_for` no longer yields before returning, so the wait would not even let the new
    call reach the server).
    """

    started: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class FakeMcpBehaviour:
    """What the server does next; tests mutate it between calls."""

    tool_name: str = TOOL_NAME
    input_schema: dict[str, Any] = field(default_factory=lambda: dict(INPUT_SCHEMA))
    output_schema: dict[str, Any] | None = field(default_factory=lambda: dict(OUTPUT_SCHEMA))
    extra_tools: list[str] = field(default_factory=list)
    results: list[Any] = field(default_factory=lambda: [synthetic_source(1)])
    structured: Any = None  # when set, returned as structuredContent instead of {"results": results}
    is_error: bool = False
    delay_s: float = 0.0
    token: str | None = None
    # HTTP faults for tools/call POSTs, consumed in order: a status code to answer with instead.
    call_faults: list[int] = field(default_factory=list)
    fault_body: bytes = b'{"error":"injected"}'
    # Like LexLatam's hosted endpoint: once a client holds the standalone GET stream open, every POST stalls.
    stall_posts_while_get_open: bool = False
    # Answer initialize with this protocol version instead of negotiating (an unsupported one, say).
    force_protocol_version: str | None = None


class FakeMcpServer:
    """Runs on a free loopback port inside the test's event loop."""

    def __init__(self, behaviour: FakeMcpBehaviour | None = None, *, json_response: bool = False) -> None:
        self.behaviour = behaviour or FakeMcpBehaviour()
        self.get_requests = 0  # standalone GET streams that reached the server
        self.open_gets = 0
        self.delete_requests = 0
        self.methods: list[str] = []
        self.tool_call_posts = 0  # tools/call requests that reached the HTTP layer
        self.tool_calls_started = 0  # tools/call handler invocations
        self.cancelled_calls = 0  # handler invocations cancelled by notifications/cancelled
        self.cancel_notifications = 0
        self.auth_headers: list[str | None] = []
        self._watches: list[CallWatch] = []
        self.queries: list[str] = []
        self.port = _free_port()
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._mcp = Server("lexvoz-test-search", on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        self._app = self._mcp.streamable_http_app(json_response=json_response)

    def next_call(self) -> CallWatch:
        """Watch the next tools/call to reach the handler (ask before the action that sends it).

        Several watches taken in a row watch the next calls in order."""
        watch = CallWatch()
        self._watches.append(watch)
        return watch

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        b = self.behaviour
        tools = [
            types.Tool(
                name=b.tool_name,
                description="Búsqueda sintética para pruebas.",
                input_schema=b.input_schema,
                output_schema=b.output_schema,
            )
        ]
        tools += [types.Tool(name=n, input_schema={"type": "object"}) for n in b.extra_tools]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        b = self.behaviour
        self.tool_calls_started += 1
        watch = self._watches.pop(0) if self._watches else CallWatch()
        watch.started.set()
        self.queries.append(str((params.arguments or {}).get("query", "")))
        try:
            if b.delay_s:
                await asyncio.sleep(b.delay_s)
        except asyncio.CancelledError:
            self.cancelled_calls += 1
            watch.cancelled.set()
            raise
        if b.is_error:
            return types.CallToolResult(content=[types.TextContent(type="text", text="búsqueda falló")], is_error=True)
        structured = b.structured if b.structured is not None else {"results": b.results}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(structured, ensure_ascii=False)[:500])],
            structured_content=structured,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        b = self.behaviour
        if scope["method"] == "GET":
            await self._serve_get(scope, receive, send)
            return
        if scope["method"] == "DELETE":
            self.delete_requests += 1
        if b.stall_posts_while_get_open and self.open_gets:
            await asyncio.Event().wait()  # stalls until the client gives up
        body = await _read_body(receive)
        method = self._record(body, headers)
        if b.token is not None and headers.get("authorization") != f"Bearer {b.token}":
            await _plain(send, 401, b'{"error":"unauthorized"}')
            return
        if method == "tools/call" and b.call_faults:
            await _plain(send, b.call_faults.pop(0), b.fault_body)
            return
        if method == "initialize" and b.force_protocol_version is not None:
            await _plain(send, 200, _initialize_reply(body, b.force_protocol_version))
            return

        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self._app(scope, replay, send)

    def _record(self, body: bytes, headers: dict[str, str]) -> str | None:
        """Count what the client sent, as the tests read it back; returns the JSON-RPC method."""
        method = None
        with contextlib.suppress(Exception):
            method = json.loads(body).get("method")
        if method == "notifications/cancelled":
            self.cancel_notifications += 1
        if method:
            self.methods.append(method)
        if method == "tools/call":
            self.tool_call_posts += 1
            self.auth_headers.append(headers.get("authorization"))
        return method

    async def _serve_get(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.get_requests += 1
        self.open_gets += 1
        try:
            await self._app(scope, receive, send)
        finally:
            self.open_gets -= 1

    async def start(self) -> None:
        config = uvicorn.Config(
            self, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            await asyncio.sleep(0.01)
            if self._task.done():
                self._task.result()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self._task, timeout=5)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[FakeMcpServer]:
        await self.start()
        try:
            yield self
        finally:
            await self.stop()


async def _read_body(receive: Receive) -> bytes:
    body = b""
    more = True
    while more:
        msg = await receive()
        body += msg.get("body", b"")
        more = msg.get("more_body", False)
    return body


def _initialize_reply(body: bytes, protocol_version: str) -> bytes:
    """An `initialize` answer that claims `protocol_version`, to test how the client meets an unknown one."""
    result = {
        "protocolVersion": protocol_version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "lexvoz-test-search", "version": "0"},
    }
    return json.dumps({"jsonrpc": "2.0", "id": json.loads(body).get("id"), "result": result}).encode()


async def _plain(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    """`python -m tests.mcp_fixture PORT`: serve the default behaviour until killed (for benchmarks)."""
    import sys

    async def _serve() -> None:
        srv = FakeMcpServer()
        srv.port = int(sys.argv[1])
        await srv.start()
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(_serve())


if __name__ == "__main__":
    main()
