"""The link to the voice model: its state in the room, and what a broken link means to each audience.

livekit-agents retries a failed Realtime connection and then closes the session with a
`RealtimeModelError`; on its own that leaves the agent's `lk.agent.state` at "listening" and the page
silent. This module watches the realtime session, keeps a participant attribute in the room that says
whether a model is connected (`lexvoz.model`: connecting | connected | reconnecting | failed), and when
the link fails for good names the cause (`lexvoz.failure`) so the page can say what happened in Spanish.
The operator gets one log line naming the setting to check, and a counter by cause.

The cause is read from the error chain the plugin raises: the HTTP status of a refused WebSocket
handshake (aiohttp's `WSServerHandshakeError`), the error code of a fatal server `error` event, or a
plain connection failure, which means "unreachable" before the link ever worked and "dropped" after.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import aiohttp
from livekit.agents import APIConnectionError, APIError, APIStatusError, llm

from agent.ops import metrics

logger = logging.getLogger("lexvoz.model")

MODEL_ATTRIBUTE = "lexvoz.model"
FAILURE_ATTRIBUTE = "lexvoz.failure"

SETTLE_TIMEOUT_S = 5.0

LinkState = Literal["connecting", "connected", "reconnecting", "failed"]
FailureCause = Literal["invalid_key", "forbidden", "unknown_model", "quota", "unreachable", "dropped", "model_error"]

_KEY_CODES = frozenset({"invalid_api_key", "invalid_authentication"})
_FORBIDDEN_CODES = frozenset({"account_deactivated", "unsupported_country_region_territory"})
_MODEL_CODES = frozenset({"model_not_found"})
_QUOTA_CODES = frozenset(
    {"insufficient_quota", "rate_limit_exceeded", "billing_hard_limit_reached", "credit_balance_exhausted"}
)

# What the operator reads: what happened, and the setting to check. Never the key itself.
OPERATOR_HINTS: dict[str, str] = {
    "invalid_key": "the Realtime endpoint rejected the API key; check OPENAI_API_KEY",
    "forbidden": "the API key may not use this model or project; check OPENAI_API_KEY and LEXVOZ_REALTIME_MODEL",
    "unknown_model": "the Realtime endpoint does not know the model; check LEXVOZ_REALTIME_MODEL (and OPENAI_BASE_URL)",
    "quota": "the account behind OPENAI_API_KEY is out of quota or rate limited; check its billing and limits",
    "unreachable": "could not reach the Realtime endpoint; check OPENAI_BASE_URL and the network",
    "dropped": "the Realtime connection dropped and the reconnects failed; check the network and OPENAI_BASE_URL",
    "model_error": "the Realtime model failed; check LEXVOZ_REALTIME_MODEL and OPENAI_BASE_URL",
}
FAILURE_CAUSES: tuple[str, ...] = tuple(OPERATOR_HINTS)


@dataclass(frozen=True, slots=True)
class ModelFailure:
    cause: FailureCause
    status: int | None = None
    code: str | None = None


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _status(error: BaseException) -> int | None:
    for exc in _chain(error):
        if isinstance(exc, aiohttp.ClientResponseError):
            return int(exc.status)
        if isinstance(exc, APIStatusError) and exc.status_code > 0:
            return int(exc.status_code)
    return None


def _code(error: BaseException) -> str | None:
    for exc in _chain(error):
        body = getattr(exc, "body", None)
        if isinstance(body, dict):
            body = body.get("error", body)
        for field in ("code", "type"):
            value = body.get(field) if isinstance(body, dict) else getattr(body, field, None)
            if isinstance(value, str) and value:
                if value in _KEY_CODES | _FORBIDDEN_CODES | _MODEL_CODES | _QUOTA_CODES:
                    return value
    return None


def classify(error: BaseException, *, was_connected: bool) -> ModelFailure:
    """The user-facing cause of a realtime failure the plugin gave up on."""
    status, code = _status(error), _code(error)
    cause: FailureCause
    if status == 401 or code in _KEY_CODES:
        cause = "invalid_key"
    elif status == 403 or code in _FORBIDDEN_CODES:
        cause = "forbidden"
    elif status == 404 or code in _MODEL_CODES:
        cause = "unknown_model"
    elif status == 429 or code in _QUOTA_CODES:
        cause = "quota"
    elif was_connected:
        cause = "dropped"
    elif status is not None or any(
        isinstance(e, APIConnectionError | aiohttp.ClientError | TimeoutError) for e in _chain(error)
    ):
        cause = "unreachable"
    else:
        cause = "model_error"
    return ModelFailure(cause=cause, status=status, code=code)


class _Participant(Protocol):
    async def set_attributes(self, attributes: dict[str, str]) -> None: ...


class _Emitter(Protocol):
    def on(self, event: str, callback: Callable[..., Any] | None = None) -> Any: ...


class ModelLink:
    """Follows one conversation's realtime session(s) and mirrors the link state into the room.

    `watch` must be called with each new realtime session before its connection task runs (the model's
    `session()` does it), so the first server event is never missed. `on_failure` runs once, at the
    moment the plugin gives up; attribute writes are ordered and `settled()` waits for them, so the
    room hears about a failure before the agent leaves it.
    """

    def __init__(
        self,
        participant: _Participant,
        *,
        endpoint: str,
        on_failure: Callable[[ModelFailure], None] | None = None,
    ) -> None:
        self._participant = participant
        self._endpoint_host = urlsplit(endpoint).hostname or endpoint
        self.on_failure = on_failure
        self.state: LinkState = "connecting"
        self.failure: ModelFailure | None = None
        self.ever_connected = False
        self._write_lock = asyncio.Lock()
        self._writes: set[asyncio.Task[None]] = set()
        self._reconnect_logged = False

    def attributes(self) -> dict[str, str]:
        attrs: dict[str, str] = {MODEL_ATTRIBUTE: self.state}
        if self.failure is not None:
            attrs[FAILURE_ATTRIBUTE] = self.failure.cause
        return attrs

    def watch(self, rt_session: _Emitter) -> None:
        rt_session.on("openai_server_event_received", self._on_server_event)
        rt_session.on("session_reconnected", self._on_reconnected)
        rt_session.on("error", self._on_error)

    def _on_server_event(self, _event: object) -> None:
        if self.state in ("connecting", "reconnecting"):
            self._set("connected")

    def _on_reconnected(self, _event: object) -> None:
        if self.state != "failed":
            logger.info("voice model connection restored")
            self._reconnect_logged = False
            self._set("connected")

    def _on_error(self, ev: llm.RealtimeModelError) -> None:
        if self.state == "failed":
            return
        if ev.recoverable:
            if isinstance(ev.error, APIConnectionError) and self.state == "connected":
                if not self._reconnect_logged:
                    logger.warning("voice model connection lost; the plugin is reconnecting")
                    self._reconnect_logged = True
                self._set("reconnecting")
            return
        failure = classify(ev.error, was_connected=self.ever_connected)
        self.failure = failure
        detail = f"HTTP {failure.status}" if failure.status is not None else (failure.code or type(ev.error).__name__)
        logger.error(
            "voice model unavailable (cause=%s, %s from %s): %s",
            failure.cause,
            detail,
            self._endpoint_host,
            OPERATOR_HINTS[failure.cause],
        )
        metrics.model_failures_total.labels(cause=failure.cause).inc()
        self._set("failed")
        if self.on_failure is not None:
            try:
                self.on_failure(failure)
            except Exception:  # the report to the room must still go out
                logger.exception("model failure handler failed")

    def _set(self, state: LinkState) -> None:
        if state == "connected":
            self.ever_connected = True
        if state == self.state:
            return
        self.state = state
        self.publish()

    def publish(self) -> None:
        """Write the current state to the room (in order, after any write already under way)."""
        attrs = self.attributes()

        async def _write() -> None:
            async with self._write_lock:
                try:
                    await self._participant.set_attributes(attrs)
                except Exception as exc:  # the room may be gone; the log line already went out
                    logger.warning("could not publish the model state: %s", type(exc).__name__)

        task = asyncio.get_running_loop().create_task(_write())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def settled(self) -> None:
        """Wait for the attribute writes under way (bounded: a dead room must not hold the job)."""
        pending = list(self._writes)
        if pending:
            await asyncio.wait(pending, timeout=SETTLE_TIMEOUT_S)


class FrameworkNoiseFilter(logging.Filter):
    """One failure, one error line: ours, which names the cause and the setting.

    livekit-agents reports a dead Realtime connection up to six more times (each retry with a traceback,
    the connection task, the failed close, and asyncio's "Task exception was never retrieved" for that
    close). Those records stay, as one-line warnings: the traceback of an `APIError` says nothing the
    cause line does not, and an ERROR for the same event would page someone twice.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        explained = exc is not None and any(isinstance(e, APIError) for e in _chain(exc))
        if not explained and record.levelno >= logging.ERROR and record.exc_info is None:
            message = record.getMessage()
            explained = message.startswith(_CLOSING_PREFIX) and "Realtime API" in message
        if explained:
            if exc is not None:
                record.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}"
                record.args = None
            record.exc_info = None
            record.exc_text = None
            if record.levelno > logging.WARNING:
                record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_CLOSING_PREFIX = "AgentSession is closing due to unrecoverable error"
_NOISE_FILTER = FrameworkNoiseFilter()


def install_framework_noise_filter() -> None:
    """Idempotent; the loggers livekit-agents and asyncio report a dead Realtime connection on."""
    for name in ("livekit.agents", "asyncio"):
        log = logging.getLogger(name)
        if _NOISE_FILTER not in log.filters:
            log.addFilter(_NOISE_FILTER)
