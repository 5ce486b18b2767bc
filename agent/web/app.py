"""The token and page service: hands the browser a short-lived LiveKit token and serves the built page.

Why it exists: the LiveKit API secret must never reach the browser, so a small server signs one token per
session, scoped to one fresh room, microphone-only publishing, and an explicit dispatch of our agent by name.
The same origin serves the page, which keeps the browser's Content-Security-Policy tight (its own scripts
plus the LiveKit URL) and lets the page call `/api/session` without CORS.

This module assembles the app (routes, security headers, error shape) and runs it; the pieces live beside
it: `session` (the API), `dispatch` (asking again for an agent), `tokens` (rooms, join and resume tokens),
`static` (the page), `limits` (rate limits, log throttling, read timeouts), `clients` (who a request comes
from, behind a proxy too), `capacity` (the whole service's caps), `metrics` (refusals by reason). Run it
with `python -m agent web`. It listens on loopback by default.

Every request but `/healthz` must name this service in its Host header (`LEXVOZ_ALLOWED_HOSTS`, port
aside), else it gets a 421 with a fixed text naming that setting. That is what defeats DNS rebinding: a
page on a name the attacker owns, resolved to this service, sends its own name as Host and as Origin, so
the same-origin check alone passed it. `/healthz` stays open whatever the Host: container health checks
and local probes address the service by an IP that is not its public name, and its answer is a constant
that costs nothing and tells nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from aiohttp import web

from agent.settings import Settings, SettingsError, get_settings
from agent.web.capacity import Capacity, RoomCensus
from agent.web.dispatch import AGENT_LIMITER_KEY, AGENTS_KEY, AgentRequests, LiveKitRooms, Rooms, request_agent
from agent.web.limits import LogThrottle, PeerRateLimiter, agent_requests_per_minute, runner_options
from agent.web.metrics import METRICS_KEY, WebMetrics, refused, serve_metrics
from agent.web.renew import renew_resume
from agent.web.session import (
    CAPACITY_KEY,
    LIMITER_KEY,
    MAX_BODY_BYTES,
    NO_STORE,
    RESUME_KEY,
    SETTINGS_KEY,
    THROTTLE_KEY,
    RequestError,
    create_session,
    json_response,
    peer_address,
)
from agent.web.static import STATIC_DIR_KEY, content_security_policy, serve_page
from agent.web.tokens import ResumeTokens, public_url

log = logging.getLogger("lexvoz.web")

CSP_KEY: Final = web.AppKey("csp", str)
# The 421's whole body: a fixed text (never the Host it refused, so nothing is reflected), telling the operator
# who put the service behind a new name which setting to change instead of showing a blank page.
FOREIGN_HOST_TEXT: Final = (
    "Este nombre no corresponde a este servicio.\n"
    "This host name is not one this service answers to (LEXVOZ_ALLOWED_HOSTS).\n"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def healthz(_request: web.Request) -> web.Response:
    """Liveness for scripts and CI: the process answers; it does not probe LiveKit."""
    return json_response({"status": "ok"}, headers={"Cache-Control": "no-store"})


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Same headers on every answer, errors included, so no path is the weak one."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        response = exc
    response.headers.setdefault("Content-Security-Policy", request.app[CSP_KEY])
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Permissions-Policy", "microphone=(self), camera=(), geolocation=()")
    if isinstance(response, web.HTTPException):
        raise response
    return response


def host_name(header: str) -> str | None:
    """The host of a Host header, lowercased, port and IPv6 brackets aside; None when it is malformed."""
    value = header.strip().lower()
    if value.startswith("["):
        host, closed, rest = value[1:].partition("]")
        if not closed or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
    else:
        host, _, port = value.partition(":")
        if port and not port.isdigit():  # a bare IPv6 address, or junk after the colon
            return None
    return host.removesuffix(".") or None


@web.middleware
async def allowed_host(request: web.Request, handler: Handler) -> web.StreamResponse:
    """421 with a fixed text for a Host that is not this service's (see the module docstring); `/healthz` aside."""
    if request.path == "/healthz":
        return await handler(request)
    headers = request.headers.getall("Host", [])
    host = host_name(headers[0]) if len(headers) == 1 else None
    if host is not None and host in request.app[SETTINGS_KEY].allowed_hosts:
        return await handler(request)
    refused(request, "host")
    shown = headers[0][:80] if headers else ""
    request.app[THROTTLE_KEY].warning("host", "refused: Host %a not allowed (peer %s)", shown, peer_address(request))
    return web.Response(
        status=421, text=FOREIGN_HOST_TEXT, content_type="text/plain", charset="utf-8", headers=NO_STORE
    )


@web.middleware
async def api_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Under /api/, every failure is JSON `{"error": ...}` (the page shows it); no stack traces leak."""
    if not request.path.startswith("/api/"):
        return await handler(request)
    try:
        return await handler(request)
    except RequestError as exc:
        refused(request, exc.reason)
        return json_response({"error": exc.message}, status=exc.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        refused(request, "bad_request")
        return json_response({"error": exc.reason}, status=exc.status, headers=_allow_header(exc))
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("unexpected error in %s", request.path)
        return json_response({"error": "error interno"}, status=500)


async def page_config(request: web.Request) -> web.Response:
    """What the page needs to know before a session starts: the mode this site runs in.

    The privacy notice on the first screen must say where the person's voice will go (OpenAI, or the local
    stand-in in rehearsal mode) before they open the microphone, and no agent has joined yet to say so. The
    agent's own `lexvoz.mode` still wins once it joins: a worker may be configured apart from this service."""
    mode = "rehearsal" if request.app[SETTINGS_KEY].rehearsal else "live"
    return json_response({"mode": mode}, headers={"Cache-Control": "no-store"})


def _allow_header(exc: web.HTTPException) -> dict[str, str]:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else {}


def create_app(
    settings: Settings,
    *,
    static_dir: Path | None = None,
    rooms: Rooms | None = None,
    census: RoomCensus | None = None,
    metrics_host: str | None = None,
) -> web.Application:
    """Build the service; `static_dir` defaults to the `LEXVOZ_WEB_DIST` setting (`web/dist`). `rooms` and
    `census` default to livekit-server's API (tests pass doubles); the metrics, when
    `LEXVOZ_WEB_PROMETHEUS_PORT` is set, listen on `metrics_host` (default `LEXVOZ_WEB_HOST`)."""
    app = web.Application(middlewares=[security_headers, allowed_host, api_errors], client_max_size=MAX_BODY_BYTES * 4)
    app[SETTINGS_KEY] = settings
    app[LIMITER_KEY] = PeerRateLimiter(settings.token_requests_per_minute)
    app[AGENT_LIMITER_KEY] = PeerRateLimiter(agent_requests_per_minute(settings))
    app[METRICS_KEY] = WebMetrics()
    app[RESUME_KEY] = resume_tokens = ResumeTokens(settings)  # spent ids: shared store, see tokens.py
    app.on_cleanup.append(lambda _app: resume_tokens.aclose())
    app[THROTTLE_KEY] = LogThrottle(log)
    app[STATIC_DIR_KEY] = static_dir if static_dir is not None else settings.web_dist
    app[CSP_KEY] = content_security_policy(settings)
    livekit = LiveKitRooms(settings)
    app[CAPACITY_KEY] = capacity = Capacity(settings, census or livekit)
    app[AGENTS_KEY] = AgentRequests(settings, rooms or livekit, budget=capacity.dispatches)
    app.on_cleanup.append(lambda _app: livekit.aclose())
    app.cleanup_ctx.append(serve_metrics(metrics_host or settings.web_host, settings.web_prometheus_port))
    app.router.add_post("/api/session", create_session)
    app.router.add_post("/api/session/renew", renew_resume)
    app.router.add_post("/api/agent", request_agent)
    app.router.add_get("/api/config", page_config)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/{tail:(?!api/).*}", serve_page)
    return app


def _display_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def main(argv: list[str] | None = None) -> int:
    """Run the service until interrupted; prints the address to open in the browser."""
    parser = argparse.ArgumentParser(prog="python -m agent web", description="Lexvoz token and page service")
    parser.add_argument("--host", help="listen address (default: LEXVOZ_WEB_HOST, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="listen port (default: LEXVOZ_WEB_PORT, 8080)")
    parser.add_argument("--static-dir", type=Path, help="built page directory (default: web/dist)")
    args = parser.parse_args(argv)
    try:
        settings = get_settings()
    except SettingsError as exc:
        print(f"lexvoz web: {exc}", file=sys.stderr)
        return 2
    host = args.host or settings.web_host
    port = args.port if args.port is not None else settings.web_port
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings, static_dir=args.static_dir, metrics_host=host)
    static_dir = app[STATIC_DIR_KEY]
    print(f"Lexvoz: open {_display_url(host, port)} in a browser (LiveKit: {public_url(settings)})", flush=True)
    if not (static_dir / "index.html").is_file():
        print(f"Warning: the page is not built at {static_dir}; run `make web` (or set LEXVOZ_WEB_DIST).", flush=True)
    if settings.rehearsal:
        print("Rehearsal mode is on (LEXVOZ_REHEARSAL): the page shows a rehearsal banner.", flush=True)
    web.run_app(app, host=host, port=port, print=None, **runner_options(settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
