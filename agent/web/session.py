"""`POST /api/session`: a fresh room, identity and token for a new conversation, or a rejoin with a resume token.

The caller never chooses the room. A body of `{}` (or none) opens a new, unguessable room; `{"resume": T}`
returns to the room and identity that T was issued for, once, while T is fresh (`resume_ttl_s`; a page in its
room renews T before then, `renew.py`). Any other field, `room` included, is refused. Requests a browser
sends from another origin are refused too: the page's own origin
(or one listed in LEXVOZ_ALLOWED_ORIGINS) may ask; a client that sends no Origin (not a browser, e.g. curl)
gains nothing from the check, since it could write any Origin it liked.

A new session is also a new paid conversation and a new agent dispatch, so it must fit the whole service's
caps (`capacity.py`: 503 with Retry-After and a Spanish message the page shows). A request body is parsed
with no way to fail but 400: deep nesting, lone surrogates (which could not be written back out as UTF-8)
and NaN/Infinity are refused as malformed JSON, never a traceback.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from typing import Any, Final
from urllib.parse import urlsplit

from aiohttp import web

from agent.settings import Settings
from agent.web.capacity import Capacity, Refusal
from agent.web.clients import client_address
from agent.web.limits import LogThrottle, PeerRateLimiter
from agent.web.metrics import refused
from agent.web.tokens import ResumeError, ResumeTokens, mint_token, new_identity, new_room_name, public_url

log = logging.getLogger("lexvoz.web")

# `{"resume": "<a ~300-char token>"}` fits in far less; anything bigger is not a request we want to parse.
MAX_BODY_BYTES: Final = 2048
ALLOWED_FIELDS: Final = frozenset({"resume"})
# Our bodies are flat objects of strings; nesting deeper than this is not a request we take.
MAX_JSON_DEPTH: Final = 4

SETTINGS_KEY: Final = web.AppKey("settings", Settings)
LIMITER_KEY: Final = web.AppKey("limiters", PeerRateLimiter)
RESUME_KEY: Final = web.AppKey("resume_tokens", ResumeTokens)
THROTTLE_KEY: Final = web.AppKey("log_throttle", LogThrottle)
CAPACITY_KEY: Final = web.AppKey("capacity", Capacity)
NO_STORE: Final = {"Cache-Control": "no-store"}

# Spanish messages stay readable on the wire (UTF-8) instead of \u escapes.
_dumps = functools.partial(json.dumps, ensure_ascii=False)


def json_response(data: object, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(data, status=status, headers=headers, dumps=_dumps)


class RequestError(Exception):
    """A client mistake, reported as `{"error": message}` with a 4xx status and nothing else; `reason` names
    it in the refusal metrics."""

    def __init__(self, status: int, message: str, *, reason: str = "bad_request") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason


def peer_address(request: web.Request) -> str:
    """The client's key for per-client limits and logs: the socket peer, or, from a trusted proxy, the client
    it forwards for (IPv6 clients by /64); see `clients.py`."""
    return client_address(request, request.app[SETTINGS_KEY].trusted_proxies)


def full_response(request: web.Request, refusal: Refusal) -> web.Response:
    """503 for a whole-service cap (or livekit-server not answering), 429 for one client's unjoined sessions;
    counted and warned about once a minute."""
    refused(request, refusal.reason)
    throttle = request.app[THROTTLE_KEY]
    if refusal.reason == "livekit":
        failure = request.app[CAPACITY_KEY].failure
        throttle.warning("livekit-census", "refused: livekit-server did not answer the room count (%s)", failure)
    elif refusal.reason == "pending":
        throttle.warning("pending", "refused: a client holds as many sessions as it may without joining them")
    else:
        throttle.warning(refusal.reason, "refused: the service is at its cap (%s)", refusal.reason)
    headers = {"Retry-After": str(refusal.retry_after_s), **NO_STORE}
    return json_response({"error": refusal.message}, status=refusal.status, headers=headers)


async def rate_limited(
    request: web.Request, limiter: PeerRateLimiter, peer: str, kind: str, what: str
) -> web.Response | None:
    """429 with Retry-After when `peer` has spent its bucket in `limiter` (counted, and warned about once a
    minute per `kind`); None when the request may go on."""
    if await limiter.try_acquire(peer):
        return None
    refused(request, "rate")
    request.app[THROTTLE_KEY].warning(kind, "%s rate limit hit (peer %s)", what, peer)
    headers = {"Retry-After": str(limiter.retry_after_s), **NO_STORE}
    return json_response({"error": "demasiadas solicitudes; espere un momento"}, status=429, headers=headers)


def origin_allowed(request: web.Request, settings: Settings) -> bool:
    """Same origin as the page (Origin's host equals Host), or listed in LEXVOZ_ALLOWED_ORIGINS."""
    origin = request.headers.get("Origin")
    if origin is None:
        # No Origin: not a browser's cross-site request, unless the browser says so another way.
        return request.headers.get("Sec-Fetch-Site", "same-origin") in ("same-origin", "none")
    allowed = settings.allowed_origin_list
    if allowed:
        return origin.lower() in allowed
    parts = urlsplit(origin)
    host = request.headers.get("Host", "")
    return parts.scheme in ("http", "https") and bool(parts.netloc) and parts.netloc.lower() == host.lower()


def foreign_origin_refusal(request: web.Request, what: str) -> web.Response | None:
    """403 for a request a browser sent from another origin (with one throttled warning naming `what`)."""
    if origin_allowed(request, request.app[SETTINGS_KEY]):
        return None
    refused(request, "origin")
    request.app[THROTTLE_KEY].warning("origin", "%s refused: origin not allowed (peer %s)", what, peer_address(request))
    return json_response({"error": "origen no permitido"}, status=403, headers=NO_STORE)


async def _read_at_most(request: web.Request, limit: int) -> bytes:
    """The whole body, or its first `limit` bytes; `read(n)` alone returns whatever has arrived so far."""
    buf = bytearray()
    while len(buf) < limit and not request.content.at_eof():
        chunk = await request.content.read(limit - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


async def read_json_object(request: web.Request, timeout_s: float) -> dict[str, Any]:
    """Parse the optional JSON object body, within `timeout_s` and MAX_BODY_BYTES ({} when there is none)."""
    if not request.body_exists or request.content_length == 0:
        return {}
    if request.content_type != "application/json":
        raise RequestError(415, "el cuerpo debe ser application/json")
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise RequestError(413, "cuerpo demasiado grande")
    try:
        async with asyncio.timeout(timeout_s):
            raw = await _read_at_most(request, MAX_BODY_BYTES + 1)
    except TimeoutError:
        raise RequestError(408, "el cuerpo tardó demasiado en llegar") from None
    if len(raw) > MAX_BODY_BYTES:
        raise RequestError(413, "cuerpo demasiado grande")
    if not raw.strip():
        return {}
    try:
        body: Any = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeError are ValueErrors
        raise RequestError(400, "JSON no válido") from None
    if not _well_formed(body, MAX_JSON_DEPTH):
        raise RequestError(400, "JSON no válido")
    if not isinstance(body, dict):
        raise RequestError(400, "se esperaba un objeto JSON")
    return body


def _well_formed(value: Any, depth_limit: int) -> bool:
    """False when parsed JSON nests containers more than `depth_limit` deep, or holds a string (key or value)
    that is not valid Unicode; one walk, without recursion.

    Python 3.11's parser refuses deep nesting with a RecursionError, newer ones parse it; either way such a
    body is not one of our requests, so it gets the same answer on every Python. A lone surrogate
    (`"\\ud800"`) parses too, then fails wherever the text is used (a log line, the echoed field names)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict | list):
            if depth > depth_limit:
                return False
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return True


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def _read_body(request: web.Request, timeout_s: float) -> dict[str, Any]:
    """The session request's body: only the fields a session takes."""
    body = await read_json_object(request, timeout_s)
    unknown = set(body) - ALLOWED_FIELDS
    if "room" in unknown:
        raise RequestError(400, "la sala no se elige: cada sesión recibe una sala nueva")
    if unknown:
        raise RequestError(400, "campos desconocidos: " + ", ".join(sorted(unknown)[:5]))
    return body


async def create_session(request: web.Request) -> web.Response:
    """`POST /api/session`: one room, one identity, one join token, a resume token, and the URL to use."""
    settings = request.app[SETTINGS_KEY]
    throttle = request.app[THROTTLE_KEY]
    if (refusal := foreign_origin_refusal(request, "session")) is not None:
        return refusal
    peer = peer_address(request)
    if (limited := await rate_limited(request, request.app[LIMITER_KEY], peer, "rate", "token")) is not None:
        return limited
    body = await _read_body(request, settings.web_body_timeout_s)
    capacity = request.app[CAPACITY_KEY]
    try:
        # Counted before a resume token is spent: an outage of the count must not burn the person's token.
        live = await capacity.live_rooms()
    except Refusal as full:
        return full_response(request, full)
    resume_tokens = request.app[RESUME_KEY]
    resumed = body.get("resume") is not None
    if resumed:
        try:
            room, identity = await resume_tokens.spend(body["resume"])  # 503 if the store is down
        except ResumeError as exc:
            refused(request, "resume")
            throttle.warning("resume", "resume refused (peer %s)", peer)
            return json_response({"error": str(exc)}, status=401, headers=NO_STORE)
    else:
        room, identity = new_room_name(), new_identity()
    try:
        capacity.admit(live, room, resumed=resumed, client=peer)
    except Refusal as full:
        return full_response(request, full)
    token = mint_token(settings, room=room, identity=identity)
    resume = resume_tokens.issue(room=room, identity=identity)
    # Room and identity only: the tokens are bearer credentials and must not end up in logs.
    log.info("session issued room=%s identity=%s peer=%s resumed=%s", room, identity, peer, resumed)
    return json_response(
        {
            "url": public_url(settings),
            "token": token,
            "room": room,
            "identity": identity,
            "resume": resume,
            "resume_ttl_s": resume_tokens.ttl_s,
        },
        headers=NO_STORE,
    )
