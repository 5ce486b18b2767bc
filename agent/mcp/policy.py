"""When the gateway may call, retry, and reconnect: the breaker, one retry, the deadline, the connect budget.

The rules, in one place:
- every attempt (lazy connect included) runs under one deadline, LEXVOZ_MCP_TIMEOUT_S; a timeout is
  final: the call is cancelled (the SDK sends `notifications/cancelled`) and the user hears the failure;
- only faults where the tool cannot have run are retried, once, after the retry delay: connection
  refused or reset before any reply, HTTP 5xx, a session the server forgot (`GatewayError.retryable`);
- the breaker counts failed searches, not attempts, and lets one trial call through when it half-opens;
- (re)connections are limited per minute, so a flapping server cannot turn each question into a storm.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from aiolimiter import AsyncLimiter

from agent.contract import REQUEST_FAILURE_REASONS
from agent.mcp.breaker import CircuitBreaker, CircuitOpen
from agent.mcp.errors import GatewayError
from agent.ops import metrics

T = TypeVar("T")

MAX_ATTEMPTS = 2


@dataclass
class Attempts:
    """How many attempts the last guarded call took (for SearchResult and tests)."""

    count: int = 0


class CallPolicy:
    """Runs one search's attempts under the breaker, the deadline and the retry rule."""

    def __init__(self, breaker: CircuitBreaker, *, timeout_s: float, retry_delay_s: float) -> None:
        self.breaker = breaker
        self._timeout_s = timeout_s
        self._retry_delay_s = retry_delay_s

    async def run(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        before_retry: Callable[[GatewayError], Awaitable[None]],
        attempts: Attempts,
    ) -> T:
        """Call `attempt` until it succeeds or fails for good; records the verdict on the breaker."""
        try:
            self.breaker.acquire()
        except CircuitOpen:
            metrics.mcp_request_errors_total.labels(kind="circuit_open").inc()
            raise GatewayError("circuit_open", "the circuit breaker is open") from None
        try:
            result = await self._attempts(attempt, before_retry, attempts)
        except GatewayError as exc:
            if exc.reason == "rate_limited":
                self.breaker.release()
            else:
                self.breaker.record_failure()
            raise
        except BaseException:
            self.breaker.release()  # cancelled: neither verdict
            raise
        self.breaker.record_success()
        return result

    async def _attempts(
        self,
        attempt: Callable[[], Awaitable[T]],
        before_retry: Callable[[GatewayError], Awaitable[None]],
        attempts: Attempts,
    ) -> T:
        while True:
            attempts.count += 1
            try:
                return await self._one(attempt)
            except GatewayError as exc:
                _count(exc)
                if not exc.retryable or attempts.count >= MAX_ATTEMPTS:
                    raise
                await before_retry(exc)
            await asyncio.sleep(self._retry_delay_s)

    async def _one(self, attempt: Callable[[], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self._timeout_s):
                return await attempt()
        except TimeoutError:
            raise GatewayError("timeout", f"no answer within {self._timeout_s:g} s; the call was cancelled") from None


def _count(exc: GatewayError) -> None:
    if exc.reason in REQUEST_FAILURE_REASONS:
        metrics.mcp_request_errors_total.labels(kind=exc.reason).inc()
    if exc.reason == "timeout":
        metrics.mcp_timeouts_total.inc()


class ConnectBudget:
    """At most N (re)connections a minute; past that, fail fast instead of queueing."""

    def __init__(self, per_minute: int) -> None:
        self._limiter = AsyncLimiter(per_minute, 60)

    async def spend(self) -> None:
        if not self._limiter.has_capacity():
            metrics.mcp_request_errors_total.labels(kind="rate_limited").inc()
            raise GatewayError("rate_limited", "too many MCP connection attempts this minute")
        await self._limiter.acquire()
