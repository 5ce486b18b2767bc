"""One live MCP session: open it, check the server's tool against the contract, close it.

The session is owned by a task of its own because anyio's scopes (the SDK's transport and session) must
be exited in the task that entered them, while searches come from any task of the worker. The
httpx client is built here with the gateway's transport (no standalone GET, capped replies), the
bearer header, and no compression, so the byte cap counts the bytes that are actually parsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
import mcp.types as types
from jsonschema import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from referencing import Registry

from agent.contract import TOOL_NAME, ContractViolation, check_tool
from agent.mcp.errors import GatewayError, Probe, classify_connect_error, reset_probe, set_probe
from agent.mcp.transport import GatewayTransport
from agent.ops.telemetry import ATTR_TOOL_COUNT, record_error, span_connect

logger = logging.getLogger("lexvoz.gateway")

CLOSE_GRACE_S = 3.0


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    url: str
    token: str | None
    connect_timeout_s: float
    read_timeout_s: float
    max_reply_bytes: int


def endpoint_label(url: str) -> str:
    """Scheme, host and port only: what the audit log may say about the endpoint."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


class Connection:
    """A session plus the checked tool and a compiled validator for the tool's own outputSchema."""

    def __init__(self, settings: ConnectionSettings) -> None:
        self._settings = settings
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.transport = GatewayTransport(max_reply_bytes=settings.max_reply_bytes, secret=settings.token)
        self.session: ClientSession | None = None
        self.tool: types.Tool | None = None
        self.output_validator: Validator | None = None
        self.protocol_version: str | None = None
        self.server_info: types.Implementation | None = None
        self.tool_count = 0
        self.dead = False
        self.end_reason: str | None = None

    async def open(self) -> None:
        """Connect and check the contract; raises GatewayError."""
        with span_connect(self._settings.url) as span:
            self._task = asyncio.create_task(self._run(), name="lexvoz-mcp-connection")
            try:
                await asyncio.wait_for(asyncio.shield(self._ready), self._settings.connect_timeout_s)
            except TimeoutError:
                await self.close("connect timed out")
                record_error(span, "timeout", True)
                raise GatewayError("timeout", "connecting to the MCP server timed out") from None
            except GatewayError as exc:
                record_error(span, exc.reason, exc.retryable)
                raise
            span.set_attribute(ATTR_TOOL_COUNT, self.tool_count)

    async def _run(self) -> None:
        token = self._settings.token
        headers = {"accept-encoding": "identity"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        probe = Probe(has_token=bool(token))
        set_probe(probe)
        try:
            async with (
                httpx2.AsyncClient(
                    headers=headers,
                    transport=self.transport,
                    timeout=httpx2.Timeout(self._settings.connect_timeout_s, read=self._settings.read_timeout_s),
                ) as client,
                streamable_http_client(self._settings.url, http_client=client) as (read, write),
                ClientSession(read, write) as session,
            ):
                await self._handshake(session)
                self.session = session
                self._ready.set_result(session)
                await self._closing.wait()
        except BaseException as exc:  # the SDK's task groups report faults as exception groups
            error = classify_connect_error(exc, probe)
            if not self._ready.done():
                self._ready.set_exception(error)
            elif not isinstance(exc, asyncio.CancelledError):
                self.end_reason = self.end_reason or error.detail
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.dead = True
            self.session = None

    async def _handshake(self, session: ClientSession) -> None:
        try:
            result = await session.initialize()
        except RuntimeError as exc:
            # The one RuntimeError initialize() raises itself: a protocol version it cannot speak.
            raise GatewayError("contract", f"the server's protocol version is not supported: {exc}") from None
        self.protocol_version = result.protocol_version
        self.server_info = result.server_info
        listed = await session.list_tools()
        self.tool_count = len(listed.tools)
        tool = next((t for t in listed.tools if t.name == TOOL_NAME), None)
        try:
            if tool is None:
                names = ", ".join(sorted(t.name for t in listed.tools)) or "none"
                raise ContractViolation([f"the server has no tool {TOOL_NAME!r} (it lists: {names})"])
            check_tool(tool.name, tool.input_schema, tool.output_schema)
        except ContractViolation as exc:
            raise GatewayError("contract", f"the server does not satisfy the contract: {exc}") from None
        self.output_validator = compile_output_schema(tool.output_schema)
        self.tool = tool

    async def call(self, query: str, probe: Probe) -> types.CallToolResult:
        """Send one tools/call; the SDK's own result validation is left to the gateway (see gateway.py)."""
        session = self.session
        if session is None:
            raise GatewayError("transport", "the MCP session closed", retryable=True, reconnect=True)
        token = set_probe(probe)
        try:
            params = types.CallToolRequestParams(name=TOOL_NAME, arguments={"query": query})
            request = types.CallToolRequest(params=params)
            return await session.send_request(request, types.CallToolResult)
        finally:
            reset_probe(token)

    async def close(self, reason: str) -> None:
        """End the session (DELETE to the server when it gave us a session id) and its task."""
        self.end_reason = self.end_reason or reason
        self._closing.set()
        if self._task is not None and not self._task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_GRACE_S)
            except (TimeoutError, Exception):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        if not self._ready.done():
            self._ready.cancel()
        elif not self._ready.cancelled():
            self._ready.exception()  # mark retrieved


def compile_output_schema(schema: Any) -> Validator:
    """Compile the tool's outputSchema once per connection; an invalid schema breaks the contract."""
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
    except SchemaError as exc:
        raise GatewayError("contract", f"the tool's outputSchema is not a valid JSON Schema: {exc.message}") from None
    return cls(schema, registry=Registry())
