"""The page service's Prometheus metrics: refused requests, by reason.

Why: refusals are logged at most once a minute per kind (`LogThrottle`), and no longer one access-log
line each, so the rate at which the service turns people and scripts away needs a counter of its own:
a flood of `rate` refusals is a client hammering, `full` is the service at its cap, `livekit` an outage.

The registry is this app's own (not prometheus_client's global one), so two apps in one process, as in
tests, do not collide. The metrics are served only when `LEXVOZ_WEB_PROMETHEUS_PORT` is set, on that port
of the service's listen address, by a separate server: never on the public app's routes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Final

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

log = logging.getLogger("lexvoz.web")

# Every reason a request is refused for; each appears at 0 from the start, so a dashboard has its series.
REASONS: Final = (
    "host",  # Host header not in LEXVOZ_ALLOWED_HOSTS
    "origin",  # a browser's request from another origin
    "rate",  # a client's per-minute limit (`POST /api/session` or `POST /api/agent`)
    "full",  # LEXVOZ_MAX_CONVERSATIONS reached
    "dispatch",  # LEXVOZ_MAX_DISPATCHES_PER_MINUTE reached
    "pending",  # a client holds LEXVOZ_MAX_PENDING_SESSIONS_PER_CLIENT sessions nobody has joined
    "livekit",  # livekit-server did not answer (the caps fail closed)
    "bad_request",  # malformed or oversized body, unknown fields, wrong content type, slow body
    "resume",  # a resume token refused (expired, spent, forged)
    "token",  # `POST /api/agent` without a valid session token
    "room",  # `POST /api/agent` for a room the caller is not in, or too soon for that room
)


class WebMetrics:
    """The counters, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._refusals = Counter(
            "lexvoz_web_refusals",
            "Requests the page service refused, by reason",
            ["reason"],
            registry=self.registry,
        )
        for reason in REASONS:
            self._refusals.labels(reason=reason)

    def refused(self, reason: str) -> None:
        self._refusals.labels(reason=reason).inc()

    def refusals(self, reason: str) -> float:
        """The current count for `reason` (for tests and the command line)."""
        value = self.registry.get_sample_value("lexvoz_web_refusals_total", {"reason": reason})
        return value or 0.0


METRICS_KEY: Final = web.AppKey("web_metrics", WebMetrics)


def refused(request: web.Request, reason: str) -> None:
    """Count one refusal of `request` for `reason`."""
    request.app[METRICS_KEY].refused(reason)


def serve_metrics(host: str, port: int | None) -> Callable[[web.Application], AsyncIterator[None]]:
    """A cleanup context for the app: while it runs, `GET /metrics` on `host:port` alone (nothing when unset)."""

    async def context(app: web.Application) -> AsyncIterator[None]:
        if port is None:
            yield
            return
        registry = app[METRICS_KEY].registry

        async def scrape(_request: web.Request) -> web.Response:
            response = web.Response(body=generate_latest(registry))
            response.headers["Content-Type"] = CONTENT_TYPE_LATEST
            return response

        scraper = web.Application()
        scraper.router.add_get("/metrics", scrape)
        runner = web.AppRunner(scraper, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
            log.info("page service metrics on %s port %d (/metrics)", host, port)
            yield
        finally:
            await runner.cleanup()

    return context
