"""What keeps one client, or one noisy client, from wearing the page service down.

- `PeerRateLimiter`: token requests per client address, in a bounded table.
- `LogThrottle`: at most one warning per kind per period, with a count of those it held back, so a
  client hammering a refused path cannot flood the logs (each refusal used to log a line).
- `SuccessAccessLogger`: aiohttp's access log for answered requests only. A refused request (any 4xx or
  5xx) writes no line of its own, else a flood of refusals is a flood of log lines and the throttled
  warning, the operator's signal, drowns; refusals are counted in the metrics instead (`metrics.py`).
- `runner_options`: the server's read timeouts and that access log. aiohttp closes a connection that has not completed a
  request's headers within its keep-alive timeout (the timer starts when the connection opens and is
  not pushed back by trickled bytes), so that timeout is our header read timeout; request bodies are
  read under `body_timeout` by the handler that reads them.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from aiohttp import web
from aiohttp.web_log import AccessLogger
from aiolimiter import AsyncLimiter

from agent.settings import Settings

# Bound the per-address limiter table so a flood of distinct addresses cannot grow memory without end.
MAX_TRACKED_PEERS: Final = 10_000
RATE_PERIOD_S: Final = 60.0
WARNING_PERIOD_S: Final = 60.0


class PeerRateLimiter:
    """One leaky bucket per client address, in an LRU table bounded in size.

    An entry idle for a whole period has refilled completely, so dropping it loses nothing; only when
    more than `max_peers` addresses are active at once does the least recently seen one get forgotten.
    """

    def __init__(self, per_minute: int, *, max_peers: int = MAX_TRACKED_PEERS, period_s: float = RATE_PERIOD_S) -> None:
        self._per_period = per_minute
        self._period_s = period_s
        self._max_peers = max_peers
        self._entries: OrderedDict[str, tuple[AsyncLimiter, float]] = OrderedDict()

    @property
    def retry_after_s(self) -> int:
        """Seconds until one more request fits: the bucket leaks one request every period/rate."""
        return max(1, math.ceil(self._period_s / self._per_period))

    def __len__(self) -> int:
        return len(self._entries)

    def _evict(self, now: float) -> None:
        while self._entries:
            _key, (_limiter, last_seen) = next(iter(self._entries.items()))
            if now - last_seen < self._period_s and len(self._entries) <= self._max_peers:
                break
            self._entries.popitem(last=False)

    async def try_acquire(self, peer: str) -> bool:
        """Take one request from `peer`'s bucket, or say False at once (never queue the caller)."""
        now = time.monotonic()
        entry = self._entries.pop(peer, None)
        limiter = entry[0] if entry else AsyncLimiter(self._per_period, self._period_s)
        self._entries[peer] = (limiter, now)
        self._evict(now)
        if not limiter.has_capacity():
            return False
        await limiter.acquire()
        return True


class LogThrottle:
    """Log a warning of each kind at most once per `period_s`; the next one says how many were held back."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        period_s: float = WARNING_PERIOD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._period_s = period_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warning(self, kind: str, message: str, *args: object) -> None:
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self._period_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        suffix = f" ({held} more like this in the last {self._period_s:.0f} s)" if held else ""
        self._logger.warning(message + suffix, *args)


class SuccessAccessLogger(AccessLogger):
    """aiohttp's access log line, for requests answered below 400 only (see the module docstring)."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        if response.status < 400:
            super().log(request, response, time)


def agent_requests_per_minute(settings: Settings) -> int:
    """`POST /api/agent` per client and minute: room for a few pages waiting at the service's pace (one request
    every `LEXVOZ_AGENT_RETRY_S`) behind one address, and never less than the token requests allowed."""
    return max(settings.token_requests_per_minute, 4 * math.ceil(RATE_PERIOD_S / settings.agent_retry_s))


def runner_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for `web.run_app`/`web.AppRunner`: the header read timeout and the access log."""
    return {"keepalive_timeout": settings.web_header_timeout_s, "access_log_class": SuccessAccessLogger}
