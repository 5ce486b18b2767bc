"""The MCP gateway: the worker's only route to a search service.

One `McpGateway` per worker process, shared by its rooms. It refuses an endpoint that would carry the
token or the questions in clear, connects lazily, validates and minimises arguments before anything
is sent, and validates results before anything is used: first against the server's own outputSchema
(a reply that breaks it is `invalid_result`, never a transport fault to retry), then against our
contract, stopping at the third valid source. The HTTP details live in `transport.py`, the session in
`connection.py`, retry/breaker/limits in `policy.py`, and the error type and its classification in
`errors.py`. Callers get `SearchResult` or a `GatewayError`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types
import pydantic
from jsonschema import exceptions as jsonschema_exceptions
from mcp.shared.exceptions import MCPError

from agent.contract import TOOL_NAME, ArgumentError, ResultError, Source, check_endpoint_url, validate_arguments
from agent.contract import validate_results as validate_contract_results
from agent.mcp.breaker import BreakerOptions, BreakerState, CircuitBreaker
from agent.mcp.connection import Connection, ConnectionSettings, endpoint_label
from agent.mcp.errors import GatewayError, Probe, classify_call_error
from agent.mcp.policy import Attempts, CallPolicy, ConnectBudget
from agent.ops import metrics
from agent.ops.redact import redact

logger = logging.getLogger("lexvoz.gateway")

DEFAULT_MAX_REPLY_BYTES = 1_048_576

__all__ = ["GatewayError", "GatewayOptions", "McpGateway", "SearchResult", "minimise_query"]


@dataclass(frozen=True, slots=True)
class SearchResult:
    sources: list[Source]
    duration_ms: float
    dropped: int = 0
    truncated: int = 0
    attempts: int = 1
    drop_reasons: list[str] = field(default_factory=list)
    query_sent: str = ""


@dataclass(frozen=True, slots=True)
class GatewayOptions:
    """Raises EndpointRefused at construction when `url` breaks the transport policy."""

    url: str
    token: str | None = None
    call_timeout_s: float = 8.0
    connect_timeout_s: float = 5.0
    retry_delay_s: float = 0.1
    breaker: BreakerOptions = field(default_factory=BreakerOptions)
    connects_per_minute: int = 10
    insecure_hosts: tuple[str, ...] = ()
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    mask_queries: bool = True

    def __post_init__(self) -> None:
        check_endpoint_url(self.url, self.insecure_hosts)
        if self.max_reply_bytes < 1024:
            raise ValueError("max_reply_bytes must be at least 1024")


def minimise_query(query: str, *, mask: bool = True) -> str:
    """The query as it leaves the worker: identity numbers, phones, e-mails and card numbers masked."""
    return redact(query) if mask else query


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
        self._conn: Connection | None = None
        self._last_end_reason: str | None = None
        self._connect_lock = asyncio.Lock()
        self._on_breaker_change = on_breaker_change
        self.breaker = CircuitBreaker(options.breaker, clock=clock, on_state_change=self._breaker_changed)
        self._policy = CallPolicy(self.breaker, timeout_s=options.call_timeout_s, retry_delay_s=options.retry_delay_s)
        self._budget = ConnectBudget(options.connects_per_minute)
        self._endpoint = endpoint_label(options.url)
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

    @property
    def connection(self) -> Connection | None:
        return self._conn

    @property
    def server_info(self) -> types.Implementation | None:
        """The server's own name and version from the last handshake (None before any); for the ledger."""
        return self._conn.server_info if self._conn is not None else None

    def query_as_sent(self, arguments: Any) -> str:
        """What `search(arguments)` would send as the query ('' when the arguments are invalid)."""
        try:
            return minimise_query(validate_arguments(arguments), mask=self._opts.mask_queries)
        except ArgumentError:
            return ""

    async def connect(self) -> types.Tool:
        """Connect (if needed) and return the checked contract tool; raises GatewayError."""
        async with self._connect_lock:
            conn = self._conn
            if conn is not None and not conn.dead and conn.tool is not None:
                return conn.tool
            reconnect_reason = self._last_end_reason
            if conn is not None:
                reconnect_reason = conn.end_reason or "the session ended"
                await self._close(conn, reconnect_reason)
                self._conn = None
            await self._budget.spend()
            self.connects += 1
            conn = Connection(
                ConnectionSettings(
                    url=self._opts.url,
                    token=self._opts.token,
                    connect_timeout_s=self._opts.connect_timeout_s,
                    read_timeout_s=max(self._opts.call_timeout_s, 30.0),
                    max_reply_bytes=self._opts.max_reply_bytes,
                )
            )
            try:
                await conn.open()
            except GatewayError as exc:
                await conn.close(exc.detail)
                metrics.mcp_connection_events_total.labels(event="connect_failed").inc()
                logger.warning("MCP connect to %s failed (%s): %s", self._endpoint, exc.reason, exc.detail)
                raise
            event = "reconnect" if reconnect_reason is not None else "connect"
            metrics.mcp_connection_events_total.labels(event=event).inc()
            logger.info(
                "MCP session %s to %s (protocol %s, %d tools)%s",
                "reopened" if event == "reconnect" else "opened",
                self._endpoint,
                conn.protocol_version,
                conn.tool_count,
                f" after: {reconnect_reason}" if reconnect_reason else "",
            )
            self._conn = conn
            self._last_end_reason = None
            assert conn.tool is not None
            return conn.tool

    async def search(self, arguments: Any, *, tool_name: str = TOOL_NAME) -> SearchResult:
        """Validate, call under the policy, validate; the duration covers all three."""
        started = time.perf_counter()
        attempts = Attempts()
        try:
            if tool_name != TOOL_NAME:
                raise GatewayError("invalid_arguments", f"tool {tool_name!r} is not part of the contract")
            try:
                query = minimise_query(validate_arguments(arguments), mask=self._opts.mask_queries)
            except ArgumentError as exc:
                raise GatewayError("invalid_arguments", str(exc)) from None
            try:
                result = await self._policy.run(
                    lambda: self._attempt(query), before_retry=self._before_retry, attempts=attempts
                )
            except GatewayError:
                metrics.mcp_latency_ms.observe((time.perf_counter() - started) * 1000)
                raise
            # a cancelled search had no round trip and is not observed
            metrics.mcp_latency_ms.observe((time.perf_counter() - started) * 1000)
        except GatewayError as exc:
            exc.duration_ms = (time.perf_counter() - started) * 1000
            raise
        if result.dropped:
            metrics.mcp_partial_results_total.inc()
            metrics.mcp_dropped_sources_total.inc(result.dropped)
            logger.warning(
                "MCP reply partly invalid: %d source(s) dropped: %s", result.dropped, "; ".join(result.drop_reasons)
            )
        return SearchResult(
            sources=result.sources,
            duration_ms=(time.perf_counter() - started) * 1000,
            dropped=result.dropped,
            truncated=result.truncated,
            attempts=attempts.count,
            drop_reasons=result.drop_reasons,
            query_sent=query,
        )

    async def _attempt(self, query: str) -> SearchResult:
        await self.connect()
        conn = self._conn
        if conn is None:
            raise GatewayError("transport", "the MCP session closed", retryable=True, reconnect=True)
        probe = Probe(has_token=bool(self._opts.token))
        metrics.mcp_requests_total.inc()
        try:
            result = await conn.call(query, probe)
        except MCPError as exc:
            raise classify_call_error(exc, probe) from None
        except pydantic.ValidationError:
            raise GatewayError("invalid_result", "the reply is not a valid MCP tools/call result") from None
        if result.is_error:
            said = _first_text(result)
            raise GatewayError("tool_error", f"the tool reported an error (isError): {said}", server_text=said)
        _check_output_schema(conn.output_validator, result)
        try:
            validated = validate_contract_results(result.structured_content)
        except ResultError as exc:
            raise GatewayError("invalid_result", str(exc)) from None
        return SearchResult(
            sources=validated.sources,
            duration_ms=0.0,
            dropped=validated.dropped,
            truncated=validated.truncated,
            drop_reasons=validated.drop_reasons,
        )

    async def _before_retry(self, exc: GatewayError) -> None:
        if exc.reconnect:
            await self._drop_connection(exc.detail)

    async def _drop_connection(self, reason: str) -> None:
        async with self._connect_lock:
            if self._conn is not None:
                await self._close(self._conn, reason)
                self._conn = None
                self._last_end_reason = reason

    async def _close(self, conn: Connection, reason: str) -> None:
        await conn.close(reason)
        metrics.mcp_connection_events_total.labels(event="disconnect").inc()
        logger.info("MCP session to %s closed: %s", self._endpoint, reason)

    async def aclose(self, reason: str = "shutdown") -> None:
        """Close the session explicitly (the worker calls this when it shuts down)."""
        await self._drop_connection(reason)


def _check_output_schema(validator: Any, result: types.CallToolResult) -> None:
    """The server's own outputSchema, checked by us so that a violation is a typed `invalid_result`."""
    if validator is None:
        return
    if result.structured_content is None:
        raise GatewayError("invalid_result", "the tool declares an outputSchema but returned no structuredContent")
    error = jsonschema_exceptions.best_match(validator.iter_errors(result.structured_content))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        said = redact(error.message)[:300]
        raise GatewayError("invalid_result", f"the reply breaks the tool's own outputSchema at {where}: {said}")


def _first_text(result: types.CallToolResult) -> str:
    for block in result.content:
        if isinstance(block, types.TextContent):
            return redact("".join(ch if ch.isprintable() else " " for ch in block.text)[:200])
    return "no text"


def insecure_hosts_of(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """Parse a comma-separated host list (LEXVOZ_MCP_INSECURE_HOSTS)."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(h.strip().lower() for h in items if h.strip())
