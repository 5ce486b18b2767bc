"""The built page and its assets, and the Content-Security-Policy that goes with them.

Paths are resolved inside the build folder or not at all: anything that escapes it, is hidden, or is not a
path a file system can hold (a NUL byte, a control character) is simply "not found", never an error.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Final
from urllib.parse import urlsplit

from aiohttp import web

from agent.settings import Settings
from agent.web.tokens import public_url

STATIC_DIR_KEY: Final = web.AppKey("static_dir", Path)

MISSING_PAGE_TEXT: Final = (
    "La página de Lexvoz no está construida todavía.\n"
    "Constrúyela con `make web` (o `cd web && npm ci && npm run build`) y recarga.\n"
    "The Lexvoz page has not been built yet: run `make web`, then reload.\n"
)


def resolve_static(root: Path, tail: str) -> Path | None:
    """Map a URL path onto a file inside `root`, refusing anything that escapes it, is hidden, or is odd."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in tail) or "\\" in tail:
        return None
    rel = PurePosixPath(tail or "index.html")
    if rel.is_absolute() or any(part in ("..", "") or part.startswith(".") for part in rel.parts):
        return None
    try:
        base = root.resolve(strict=True)
        candidate = (base / rel).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):  # ValueError: what the OS cannot name (e.g. a NUL byte)
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
    path = resolve_static(root, tail)
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
