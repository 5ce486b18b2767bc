"""The MCP gateway: the worker's only route to a search service.

One `McpGateway` per worker process, shared by its rooms. It connects lazily, checks the server's
tool against our contract before the first call, validates arguments before anything is sent and
results before anything is used, and wraps each call in a timeout, one retry for transient faults
(tenacity), and a circuit breaker. Callers get `SearchResult` or a `GatewayError` whose `kind` is a
short code that the metrics, the ledger and the room all share.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp.types as types
from aiolimiter import AsyncLimiter
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_fixed

from agent.contract import (
    REQUEST_FAILURE_REASONS,
    TOOL_NAME,
    ArgumentError,
    ContractViolation,
    FailureReason,
    ResultError,
    Source,
    check_tool,
    validate_arguments,
    validate_results,
)
from agent.mcp.breaker import BreakerOptions, BreakerState, CircuitBreaker, CircuitOpen
from agent.ops import metrics
from agent.ops.telemetry import ATTR_TOOL_COUNT, record_error, span_connect

logger = logging.getLogger("lexvoz.gateway")


class GatewayError(Exception):
    """A search that produced no evidence. `kind` says why (the shared vocabulary); `detail` is safe to log."""

    def __init__(self, kind: FailureReason, detail: str, *, transient: bool = False) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.transient = transient
        self.duration_ms: float | None = None


@dataclass(frozen=True, slots=True)
class SearchResult:
    sources: list[Source]
    duration_ms: float
    dropped: int = 0
    truncated: int = 0
    attempts: int = 1


@dataclass(frozen=True, slots=True)
class GatewayOptions:
    url: str
    token: str | None = None
    call_timeout_s: float = 8.0
    connect_timeout_s: float = 5.0
    retry_delay_s: float = 0.1
    breaker: BreakerOptions = field(default_factory=BreakerOptions)
    connects_per_minute: int = 10


@dataclass
class _Probe:
    """What the HTTP layer saw for one attempt; the SDK folds these into one generic error."""

    statuses: list[int] = field(default_factory=list)
    transport_error: Exception | None = None


_probe: contextvars.ContextVar[_Probe | None] = contextvars.ContextVar("lexvoz_mcp_probe", default=None)


class _ProbingTransport(httpx2.AsyncBaseTransport):
    """Records HTTP statuses and transport faults of the current attempt (the SDK hides them)."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        probe = _probe.get()
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            if probe is not None:
                probe.transport_error = exc
            raise
        if probe is not None and request.method == "POST":
            probe.statuses.append(response.status_code)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Connection:
    """One live MCP session, owned by a task of its own (anyio scopes must exit where they began)."""

    def __init__(self, opts: GatewayOptions) -> None:
        self._opts = opts
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.session: ClientSession | None = None
        self.tool: types.Tool | None = None
        self.tool_count = 0
        self.dead = False

    async def open(self) -> None:
        with span_connect(self._opts.url) as span:
            self._task = asyncio.create_task(self._run(), name="lexvoz-mcp-connection")
            try:
                await asyncio.wait_for(asyncio.shield(self._ready), self._opts.connect_timeout_s)
            except TimeoutError:
                await self.close()
                record_error(span, "timeout", True)
                raise GatewayError("timeout", "connecting to the MCP server timed out", transient=True) from None
            except GatewayError as exc:
                record_error(span, exc.kind, exc.transient)
                raise
            span.set_attribute(ATTR_TOOL_COUNT, self.tool_count)

    async def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self._opts.token}"} if self._opts.token else {}
        probe = _Probe()
        _probe.set(probe)
        try:
            async with (
                httpx2.AsyncClient(
                    headers=headers,
                    transport=_ProbingTransport(),
                    timeout=httpx2.Timeout(self._opts.connect_timeout_s, read=max(self._opts.call_timeout_s, 30.0)),
                ) as client,
                streamable_http_client(self._opts.url, http_client=client) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                listed = await session.list_tools()
                self.tool_count = len(listed.tools)
                tool = next((t for t in listed.tools if t.name == TOOL_NAME), None)
                if tool is None:
                    names = ", ".join(sorted(t.name for t in listed.tools)) or "none"
                    raise ContractViolation([f"the server has no tool {TOOL_NAME!r} (it lists: {names})"])
                check_tool(tool.name, tool.input_schema, tool.output_schema)
                self.tool = tool
                self.session = session
                self._ready.set_result(session)
                await self._closing.wait()
        except BaseException as exc:  # the transport reports faults as exception groups
            error = _classify_connect_error(exc, probe)
            if not self._ready.done():
                self._ready.set_exception(error)
            elif isinstance(exc, asyncio.CancelledError):
                logger.debug("MCP session closed")
            else:
                logger.warning("MCP session ended: %s", error.detail)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.dead = True
            self.session = None

    async def close(self) -> None:
        self._closing.set()
        if self._task is not None and not self._task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 3)
            except (TimeoutError, Exception):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        if not self._ready.done():
            self._ready.cancel()
        elif not self._ready.cancelled():
            self._ready.exception()  # mark retrieved


class McpGateway:
    """Validated, bounded, guarded calls to the contract tool on one MCP server."""

    def __init__(
        self,
        options: GatewayOptions,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_breaker_change: Callable[[BreakerState], None] | None = None,
    ) -> None:
        self._opts = options
        self._conn: _Connection | None = None
        self._connect_lock = asyncio.Lock()
        self._on_breaker_change = on_breaker_change
        self.breaker = CircuitBreaker(options.breaker, clock=clock, on_state_change=self._breaker_changed)
        self._connect_limiter = AsyncLimiter(options.connects_per_minute, 60)
        self.connects = 0

    def _breaker_changed(self, state: BreakerState) -> None:
        metrics.mcp_circuit_breaker_state.set(int(state))
        logger.info("circuit breaker is now %s", state.name.lower())
        if self._on_breaker_change is not None:
            self._on_breaker_change(state)

    @property
    def options(self) -> GatewayOptions:
        return self._opts

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.dead and self._conn.session is not None

    async def connect(self) -> types.Tool:
        """Connect (if needed) and return the checked contract tool; raises GatewayError."""
        async with self._connect_lock:
            if self._conn is not None and not self._conn.dead and self._conn.tool is not None:
                return self._conn.tool
            if self._conn is not None:
                await self._conn.close()
                self._conn = None
            if not self._connect_limiter.has_capacity():
                metrics.mcp_request_errors_total.labels(kind="rate_limited").inc()
                raise GatewayError("rate_limited", "too many MCP connection attempts this minute")
            await self._connect_limiter.acquire()
            self.connects += 1
            conn = _Connection(self._opts)
            try:
                await conn.open()
            except GatewayError:
                await conn.close()
                raise
            self._conn = conn
            assert conn.tool is not None
            return conn.tool

    async def search(self, arguments: Any, *, tool_name: str = TOOL_NAME) -> SearchResult:
        """Validate, call with retry and breaker, validate; the duration covers all three."""
        started = time.perf_counter()
        try:
            if tool_name != TOOL_NAME:
                raise GatewayError("invalid_arguments", f"tool {tool_name!r} is not part of the contract")
            try:
                query = validate_arguments(arguments)
            except ArgumentError as exc:
                raise GatewayError("invalid_arguments", str(exc)) from None
            try:
                self.breaker.acquire()
            except CircuitOpen:
                metrics.mcp_request_errors_total.labels(kind="circuit_open").inc()
                raise GatewayError("circuit_open", "the circuit breaker is open") from None
            attempts = 0
            try:
                async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(2),
                    wait=wait_fixed(self._opts.retry_delay_s),
                    retry=retry_if_exception(lambda e: isinstance(e, GatewayError) and e.transient),
                    reraise=True,
                ):
                    with attempt:
                        attempts += 1
                        structured = await self._counted_call(query)
                validated = _validate(structured)
            except GatewayError as exc:
                if exc.kind == "invalid_result":
                    metrics.mcp_request_errors_total.labels(kind="invalid_result").inc()
                if exc.kind != "rate_limited":
                    self.breaker.record_failure()
                else:
                    self.breaker.release()
                metrics.mcp_latency_ms.observe((time.perf_counter() - started) * 1000)
                raise
            except BaseException:
                self.breaker.release()
                raise
            self.breaker.record_success()
            metrics.mcp_latency_ms.observe((time.perf_counter() - started) * 1000)
            return SearchResult(
                sources=validated.sources,
                duration_ms=(time.perf_counter() - started) * 1000,
                dropped=validated.dropped,
                truncated=validated.truncated,
                attempts=attempts,
            )
        except GatewayError as exc:
            exc.duration_ms = (time.perf_counter() - started) * 1000
            raise

    async def _counted_call(self, query: str) -> Any:
        try:
            result = await self._call_once(query)
        except GatewayError as exc:
            if exc.kind in REQUEST_FAILURE_REASONS:
                metrics.mcp_request_errors_total.labels(kind=exc.kind).inc()
            if exc.kind == "timeout":
                metrics.mcp_timeouts_total.inc()
            raise
        return result

    async def _call_once(self, query: str) -> Any:
        await self.connect()
        conn = self._conn
        session = conn.session if conn is not None else None
        if session is None:
            raise GatewayError("transport", "the MCP session closed", transient=True)
        probe = _Probe()
        token = _probe.set(probe)
        metrics.mcp_requests_total.inc()
        try:
            result = await asyncio.wait_for(
                session.call_tool(TOOL_NAME, {"query": query}, read_timeout_seconds=self._opts.call_timeout_s),
                self._opts.call_timeout_s + 0.5,
            )
        except TimeoutError:
            raise GatewayError("timeout", "the MCP call timed out", transient=True) from None
        except MCPError as exc:
            error = _classify_call_error(exc, probe)
            if error.kind == "transport":
                await self._drop_connection()
            raise error from None
        except (httpx2.TransportError, OSError, RuntimeError) as exc:
            await self._drop_connection()
            raise GatewayError("transport", type(exc).__name__, transient=True) from None
        except Exception as exc:  # the SDK's own output-schema validation, among others
            if "validat" in type(exc).__name__.lower() or "schema" in str(exc).lower():
                raise GatewayError("invalid_result", "the result does not match the tool's outputSchema") from None
            await self._drop_connection()
            raise GatewayError("transport", type(exc).__name__, transient=True) from None
        finally:
            _probe.reset(token)
        if result.is_error:
            raise GatewayError("tool_error", "the tool reported an error (isError)")
        return result.structured_content

    async def _drop_connection(self) -> None:
        async with self._connect_lock:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None

    async def aclose(self) -> None:
        await self._drop_connection()


def _validate(structured: Any) -> Any:
    try:
        return validate_results(structured)
    except ResultError as exc:
        raise GatewayError(exc.code, str(exc)) from None


def _status_error(statuses: list[int]) -> GatewayError | None:
    for status in statuses:
        if status in (401, 403):
            return GatewayError("auth", f"the MCP server refused our credentials (HTTP {status})")
    if 404 in statuses:
        return GatewayError("transport", "the MCP server does not know our session (HTTP 404)", transient=True)
    for status in statuses:
        if status >= 500:
            return GatewayError("transport", f"the MCP server failed (HTTP {status})", transient=True)
    return None


def _classify_call_error(exc: MCPError, probe: _Probe) -> GatewayError:
    status_error = _status_error(probe.statuses)
    if status_error is not None:
        return status_error
    if probe.transport_error is not None:
        return GatewayError("transport", type(probe.transport_error).__name__, transient=True)
    code = exc.error.code
    if code == types.REQUEST_TIMEOUT:
        return GatewayError("timeout", "the MCP call timed out", transient=True)
    if code == types.CONNECTION_CLOSED:
        return GatewayError("transport", "the MCP connection closed", transient=True)
    if code == types.INVALID_REQUEST and "terminated" in exc.error.message.lower():
        return GatewayError("transport", "the MCP session was terminated by the server", transient=True)
    return GatewayError("tool_error", f"the MCP server answered with error {code}")


def _classify_connect_error(exc: BaseException, probe: _Probe) -> GatewayError:
    leaves = list(_leaves(exc))
    for leaf in leaves:
        if isinstance(leaf, GatewayError):
            return leaf
        if isinstance(leaf, ContractViolation):
            return GatewayError("contract", f"the server does not satisfy the contract: {leaf}")
    status_error = _status_error(probe.statuses)
    if status_error is not None:
        return status_error
    for leaf in leaves:
        if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
            return GatewayError("timeout", "connecting to the MCP server timed out", transient=True)
        if isinstance(leaf, httpx2.TransportError | OSError):
            return GatewayError("transport", f"cannot reach the MCP server ({type(leaf).__name__})", transient=True)
        if isinstance(leaf, MCPError):
            return GatewayError("transport", f"the MCP handshake failed ({leaf.error.message})", transient=True)
    names = ", ".join(type(leaf).__name__ for leaf in leaves) or type(exc).__name__
    return GatewayError("transport", f"the MCP connection failed ({names})", transient=True)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for sub in exc.exceptions:
            out.extend(_leaves(sub))
        return out
    return [exc]
