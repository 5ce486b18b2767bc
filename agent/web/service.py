"""The token and page service: hands the browser a short-lived LiveKit token and serves the built page.

Why it exists: the LiveKit API secret must never reach the browser, so a small server signs one token per
session, scoped to one room, microphone-only publishing, and an explicit dispatch of our agent by name.
The same origin serves the page, which keeps the browser's Content-Security-Policy tight (its own scripts
plus the LiveKit URL) and lets the page call `/api/session` without CORS.

Run it with `python -m agent web` (wired to `main`). It listens on loopback by default.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import math
import re
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path, PurePosixPath
from typing import Any, Final
from urllib.parse import urlsplit

from aiohttp import web
from aiolimiter import AsyncLimiter
from livekit import api

from agent.settings import Settings, SettingsError, get_settings

log = logging.getLogger("lexvoz.web")

# A room name the caller may ask for: lowercase, digits and dashes, 3..63 chars, no leading dash.
# Strict on purpose: the name ends up in logs, in the token, and in LiveKit's room list.
ROOM_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9-]{2,62}$")
ROOM_PREFIX: Final = "lexvoz-"
IDENTITY_PREFIX: Final = "usuario-"
# LiveKit refreshes the token of a connected participant itself, so the one we hand out only has to
# last until the browser joins; 15 minutes is the ceiling whatever the settings say.
MAX_TOKEN_TTL_S: Final = 900
# `{"room": "<63 chars>"}` fits in far less; anything bigger is not a request we want to parse.
MAX_BODY_BYTES: Final = 1024
ALLOWED_FIELDS: Final = frozenset({"room"})
# Bound the per-address limiter table so a flood of distinct addresses cannot grow memory without end.
MAX_TRACKED_PEERS: Final = 10_000
RATE_PERIOD_S: Final = 60.0

MISSING_PAGE_TEXT: Final = (
    "La página de Lexvoz no está construida todavía.\n"
    "Constrúyela con `make web` (o `cd web && npm ci && npm run build`) y recarga.\n"
    "The Lexvoz page has not been built yet: run `make web`, then reload.\n"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Spanish messages stay readable on the wire (UTF-8) instead of \u escapes.
_dumps = functools.partial(json.dumps, ensure_ascii=False)


def _json(data: object, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(data, status=status, headers=headers, dumps=_dumps)


class RequestError(Exception):
    """A client mistake, reported as `{"error": message}` with a 4xx status and nothing else."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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


SETTINGS_KEY: Final = web.AppKey("settings", Settings)
LIMITER_KEY: Final = web.AppKey("limiters", PeerRateLimiter)
STATIC_DIR_KEY: Final = web.AppKey("static_dir", Path)
CSP_KEY: Final = web.AppKey("csp", str)


def _peer_address(request: web.Request) -> str:
    """The direct TCP peer, read from the socket.

    X-Forwarded-For and Forwarded are ignored: any client can write them, so trusting them would let one
    client spread its requests over invented addresses and dodge the limit. Behind a reverse proxy every
    client shares the proxy's bucket, which errs on the safe side.
    """
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    if isinstance(peer, tuple | list) and peer and isinstance(peer[0], str):
        return peer[0]
    return request.remote or "unknown"


def _random_suffix() -> str:
    # 12 hex chars = 48 bits: rooms are not secrets (the token is), this only has to avoid collisions.
    return secrets.token_hex(6)


def new_room_name() -> str:
    """A fresh room for one conversation, so two browsers never share a session by accident."""
    return f"{ROOM_PREFIX}{_random_suffix()}"


def new_identity() -> str:
    """A throwaway participant identity; we keep no user accounts."""
    return f"{IDENTITY_PREFIX}{_random_suffix()}"


def public_url(settings: Settings) -> str:
    """The LiveKit URL the browser connects to, which may differ from the one the worker uses."""
    return settings.public_livekit_url or settings.livekit_url


def mint_token(settings: Settings, *, room: str, identity: str) -> str:
    """Sign a join token for exactly one room: microphone and data (chat) only, and our agent dispatched.

    Explicit dispatch by name means the worker only joins rooms that this service opened for it.
    """
    ttl_s = min(settings.token_ttl_s, MAX_TOKEN_TTL_S)
    grants = api.VideoGrants(
        room_join=True,
        room=room,
        can_publish=True,
        can_publish_sources=["microphone"],
        can_publish_data=True,
        can_subscribe=True,
    )
    return (
        api.AccessToken(settings.livekit_api_key, settings.livekit_api_secret.get_secret_value())
        .with_identity(identity)
        .with_name("Usuario")
        .with_kind("standard")
        .with_ttl(timedelta(seconds=ttl_s))
        .with_grants(grants)
        .with_room_config(api.RoomConfiguration(agents=[api.RoomAgentDispatch(agent_name=settings.agent_name)]))
        .to_jwt()
    )


async def _read_session_request(request: web.Request) -> str | None:
    """Parse the optional `{"room": "..."}` body; returns the requested room or None for a fresh one."""
    if not request.body_exists or request.content_length == 0:
        return None
    if request.content_type != "application/json":
        raise RequestError(415, "el cuerpo debe ser application/json")
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise RequestError(413, "cuerpo demasiado grande")
    raw = await request.content.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise RequestError(413, "cuerpo demasiado grande")
    if not raw.strip():
        return None
    try:
        body: Any = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise RequestError(400, "JSON no válido") from None
    if not isinstance(body, dict):
        raise RequestError(400, "se esperaba un objeto JSON")
    unknown = set(body) - ALLOWED_FIELDS
    if unknown:
        raise RequestError(400, "campos desconocidos: " + ", ".join(sorted(unknown)[:5]))
    room = body.get("room")
    if room is None:
        return None
    if not isinstance(room, str) or not ROOM_PATTERN.fullmatch(room):
        raise RequestError(400, "nombre de sala no válido: use minúsculas, dígitos y guiones (3 a 63)")
    return room


async def create_session(request: web.Request) -> web.Response:
    """`POST /api/session`: one room, one identity, one token, and the URL to use it on."""
    settings = request.app[SETTINGS_KEY]
    peer = _peer_address(request)
    if not await request.app[LIMITER_KEY].try_acquire(peer):
        retry = request.app[LIMITER_KEY].retry_after_s
        log.warning("token rate limit hit for %s", peer)
        return _json(
            {"error": "demasiadas solicitudes; espere un momento"},
            status=429,
            headers={"Retry-After": str(retry), "Cache-Control": "no-store"},
        )
    requested = await _read_session_request(request)
    room = requested or new_room_name()
    identity = new_identity()
    token = mint_token(settings, room=room, identity=identity)
    # Room and identity only: the token is a bearer credential and must not end up in logs.
    log.info("session issued room=%s identity=%s peer=%s requested=%s", room, identity, peer, requested is not None)
    return _json(
        {"url": public_url(settings), "token": token, "room": room, "identity": identity},
        headers={"Cache-Control": "no-store"},
    )


async def healthz(_request: web.Request) -> web.Response:
    """Liveness for scripts and CI: the process answers; it does not probe LiveKit."""
    return _json({"status": "ok"}, headers={"Cache-Control": "no-store"})


def _resolve_static(root: Path, tail: str) -> Path | None:
    """Map a URL path onto a file inside `root`, refusing anything that escapes it or is hidden."""
    rel = PurePosixPath(tail or "index.html")
    if rel.is_absolute() or any(part in ("..", "") or part.startswith(".") for part in rel.parts):
        return None
    try:
        base = root.resolve(strict=True)
        candidate = (base / rel).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not candidate.is_relative_to(base) or not candidate.is_file():
        return None
    return candidate


async def serve_page(request: web.Request) -> web.StreamResponse:
    """The built page and its assets, looked up per request so a `make web` needs no restart."""
    root = request.app[STATIC_DIR_KEY]
    if not (root / "index.html").is_file():
        return web.Response(status=503, text=MISSING_PAGE_TEXT, content_type="text/plain", charset="utf-8")
    tail = request.match_info.get("tail", "")
    path = _resolve_static(root, tail)
    if path is None:
        raise web.HTTPNotFound(text="no encontrado")
    response = web.FileResponse(path)
    if tail.startswith("assets/"):
        # Vite puts a content hash in every asset name, so they never change under the same URL.
        response.headers["Cache-Control"] = "public, max-age=31536000, immutable"
    else:
        response.headers["Cache-Control"] = "no-cache"
    return response


def _livekit_origins(url: str) -> list[str]:
    """The origins the page may connect to for LiveKit: the WebSocket and its HTTP twin.

    livekit-client opens the signalling WebSocket and, when that fails, asks the same host over HTTP(S)
    why; both must pass `connect-src`.
    """
    parts = urlsplit(url)
    if not parts.hostname:
        return []
    host = parts.netloc.rsplit("@", 1)[-1]
    secure = parts.scheme in ("wss", "https")
    return [f"{'wss' if secure else 'ws'}://{host}", f"{'https' if secure else 'http'}://{host}"]


def content_security_policy(settings: Settings) -> str:
    """Only our own scripts and styles; network only to ourselves and the LiveKit server."""
    connect = " ".join(["'self'", *_livekit_origins(public_url(settings))])
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "font-src 'self'",
            f"connect-src {connect}",
            "media-src 'self' blob: mediastream:",
            "worker-src 'self' blob:",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )


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


@web.middleware
async def api_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Under /api/, every failure is JSON `{"error": ...}` (the page shows it); no stack traces leak."""
    if not request.path.startswith("/api/"):
        return await handler(request)
    try:
        return await handler(request)
    except RequestError as exc:
        return _json({"error": exc.message}, status=exc.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _json({"error": exc.reason}, status=exc.status, headers=_allow_header(exc))
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("unexpected error in %s", request.path)
        return _json({"error": "error interno"}, status=500)


def _allow_header(exc: web.HTTPException) -> dict[str, str]:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else {}


def create_app(settings: Settings, *, static_dir: Path | None = None) -> web.Application:
    """Build the service; `static_dir` defaults to the `LEXVOZ_WEB_DIST` setting (`web/dist`)."""
    app = web.Application(middlewares=[security_headers, api_errors], client_max_size=MAX_BODY_BYTES * 4)
    app[SETTINGS_KEY] = settings
    app[LIMITER_KEY] = PeerRateLimiter(settings.token_requests_per_minute)
    app[STATIC_DIR_KEY] = static_dir if static_dir is not None else settings.web_dist
    app[CSP_KEY] = content_security_policy(settings)
    app.router.add_post("/api/session", create_session)
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
    app = create_app(settings, static_dir=args.static_dir)
    static_dir = app[STATIC_DIR_KEY]
    print(f"Lexvoz: abra {_display_url(host, port)} en el navegador (LiveKit: {public_url(settings)})", flush=True)
    if not (static_dir / "index.html").is_file():
        print("Aviso: la página no está construida; ejecute `make web`.", flush=True)
    if settings.rehearsal:
        print("Modo de ensayo activo (LEXVOZ_REHEARSAL).", flush=True)
    web.run_app(app, host=host, port=port, print=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
