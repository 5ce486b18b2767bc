"""One typed error for every search that produced no evidence, and the rules that classify faults into it.

The SDK folds HTTP statuses, socket faults and JSON-RPC errors into a few generic exceptions, so the
transport records what it saw on the wire in a `Probe` (statuses, the fault, whether a reply had
started, the server's own error text) and the functions here turn that record plus the exception into
a `GatewayError`: a `reason` the room, metrics and ledger share, a `detail` for the operator, and
whether the attempt may be retried. Classification reads types and status codes, never exception names.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

import httpx2
import mcp.types as types
from mcp.shared.exceptions import MCPError

from agent.contract import FailureReason

__all__ = ["GatewayError", "Probe", "classify_call_error", "classify_connect_error", "current_probe"]

MAX_SERVER_TEXT_CHARS = 300


class GatewayError(Exception):
    """A search that produced no evidence.

    `reason` is one of the shared failure reasons (`agent.contract.FailureReason`). `detail` is English for
    the operator and safe to log (no query, no token). `server_text` is what the server itself said, when it
    said anything. `retryable` is true only for faults where the tool cannot have run: connection
    refused/reset before any reply, HTTP 5xx, or a session the server forgot. `reconnect` asks the gateway
    to drop the session first.
    """

    def __init__(
        self,
        reason: FailureReason,
        detail: str,
        *,
        retryable: bool = False,
        reconnect: bool = False,
        status: int | None = None,
        server_text: str | None = None,
    ) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: FailureReason = reason
        self.detail = detail
        self.retryable = retryable
        self.reconnect = reconnect
        self.status = status
        self.server_text = server_text
        self.duration_ms: float | None = None


@dataclass
class Probe:
    """What the HTTP layer saw during one attempt (a connect or one call)."""

    has_token: bool = False
    statuses: list[int] = field(default_factory=list)
    transport_error: httpx2.TransportError | None = None
    replies_started: int = 0  # responses with a 2xx status whose body began to arrive
    too_large: int | None = None  # the byte cap, when a reply exceeded it
    server_text: str | None = None


_probe: contextvars.ContextVar[Probe | None] = contextvars.ContextVar("lexvoz_mcp_probe", default=None)


def current_probe() -> Probe | None:
    return _probe.get()


def set_probe(probe: Probe) -> contextvars.Token[Probe | None]:
    """Record this task's HTTP traffic (and the SDK tasks it spawns, which copy its context) in `probe`."""
    return _probe.set(probe)


def reset_probe(token: contextvars.Token[Probe | None]) -> None:
    _probe.reset(token)


def _with_text(detail: str, probe: Probe) -> str:
    return f"{detail}; the server said: {probe.server_text}" if probe.server_text else detail


def _status_error(probe: Probe, *, in_session: bool) -> GatewayError | None:
    text = probe.server_text
    for status in probe.statuses:
        if status == 401 and not probe.has_token:
            detail = "the MCP server wants credentials and no token is configured (HTTP 401): set LEXVOZ_MCP_TOKEN"
            return GatewayError("auth", _with_text(detail, probe), status=status, server_text=text)
        if status in (401, 403):
            verb = "refused our credentials" if status == 401 else "refused access with our credentials"
            detail = _with_text(f"the MCP server {verb} (HTTP {status})", probe)
            return GatewayError("auth", detail, status=status, server_text=text)
    for status in probe.statuses:
        if status == 404 and in_session:
            detail = "the MCP server no longer knows our session (HTTP 404); reconnecting"
            return GatewayError("transport", detail, retryable=True, reconnect=True, status=status, server_text=text)
        if status == 404:
            detail = "nothing answers MCP at this URL (HTTP 404 Not Found): check the path, e.g. /mcp"
            return GatewayError("transport", _with_text(detail, probe), status=status, server_text=text)
        if status == 405:
            detail = "this URL does not accept MCP POST requests (HTTP 405 Method Not Allowed): check the path"
            return GatewayError("transport", _with_text(detail, probe), status=status, server_text=text)
        if status >= 500:
            detail = _with_text(f"the MCP server failed (HTTP {status})", probe)
            return GatewayError("transport", detail, retryable=True, reconnect=True, status=status, server_text=text)
        if status >= 400:
            detail = _with_text(f"the MCP server rejected the request (HTTP {status})", probe)
            return GatewayError("transport", detail, status=status, server_text=text)
    return None


def _transport_error(probe: Probe, fault: BaseException) -> GatewayError | None:
    if isinstance(fault, httpx2.TimeoutException):
        return GatewayError("timeout", "the MCP server did not answer in time")
    if isinstance(fault, httpx2.ConnectError):
        return GatewayError("transport", "cannot reach the MCP server (connection refused)", retryable=True)
    if isinstance(fault, httpx2.TransportError | OSError):
        before_reply = probe.replies_started == 0
        detail = "the connection to the MCP server was reset " + ("before it replied" if before_reply else "mid-reply")
        return GatewayError("transport", detail, retryable=before_reply, reconnect=True)
    return None


def _too_large(probe: Probe) -> GatewayError | None:
    if probe.too_large is None:
        return None
    return GatewayError("invalid_result", f"the MCP reply exceeded {probe.too_large} bytes and was not read further")


def classify_call_error(exc: MCPError, probe: Probe) -> GatewayError:
    """A tools/call that came back as a JSON-RPC error (real, or made up by the SDK's transport)."""
    found = _too_large(probe) or _status_error(probe, in_session=True)
    if found is None and probe.transport_error is not None:
        found = _transport_error(probe, probe.transport_error)
    if found is not None:
        return found
    code = exc.error.code
    if code == types.REQUEST_TIMEOUT:
        return GatewayError("timeout", "the MCP call timed out")
    if code == types.CONNECTION_CLOSED:
        return GatewayError("transport", "the MCP connection closed before the reply", reconnect=True)
    if code == types.PARSE_ERROR:
        return GatewayError("invalid_result", f"the MCP reply could not be parsed ({_clip(exc.error.message)})")
    said = _clip(exc.error.message)
    return GatewayError("tool_error", f"the MCP server answered with error {code}: {said}", server_text=said)


def classify_connect_error(exc: BaseException, probe: Probe) -> GatewayError:
    """Why opening the session failed; the SDK's task groups wrap faults in exception groups."""
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, GatewayError):
            return leaf
    found = _too_large(probe) or _status_error(probe, in_session=False)
    if found is not None:
        found.reconnect = False
        return found
    faults: list[BaseException] = [probe.transport_error] if probe.transport_error is not None else []
    for leaf in [*faults, *leaves]:
        classified = _transport_error(probe, leaf)
        if classified is not None:
            return classified
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            said = _clip(leaf.error.message)
            return GatewayError("transport", f"the MCP handshake failed: {said}", server_text=said)
        if isinstance(leaf, TimeoutError):
            return GatewayError("timeout", "connecting to the MCP server timed out")
    kinds = ", ".join(sorted({type(leaf).__name__ for leaf in leaves}))
    return GatewayError("transport", f"the MCP connection failed ({kinds})")


def _clip(text: str) -> str:
    clean = "".join(ch if ch.isprintable() else " " for ch in text).strip()
    return clean[:MAX_SERVER_TEXT_CHARS]


def server_text_of(body: bytes) -> str | None:
    """The first line or so of an error body, printable characters only (for the operator)."""
    text = _clip(body.decode("utf-8", errors="replace"))
    return text or None


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for sub in exc.exceptions:
            out.extend(_leaves(sub))
        return out
    return [exc]
