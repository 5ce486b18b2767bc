"""Dropping the model's sockets on purpose: ``POST /control/drop_connections``.

Why: a deployment loses its connection to the Realtime API now and then, often while an answer is being
streamed, and the worker must reconnect (or say it could not) every time, not only the first. The soak
benchmark runs the stand-in as a subprocess, so it needs this over HTTP. The drop is what the real service
does when it goes away: the server closes each open WebSocket with 1011 (internal error) and no
``response.done``; the response being streamed is cut wherever it is. Loopback only, like every route here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from aiohttp import WSCloseCode, web

if TYPE_CHECKING:
    from .server import RealtimeStandIn

__all__ = ["add_fault_routes", "drop_connections"]

logger = logging.getLogger("realtime_standin")

MAX_WAIT_S = 120.0


def _answering(standin: RealtimeStandIn) -> bool:
    return any(not c.closed and c.active_response is not None for c in standin.connections)


async def drop_connections(standin: RealtimeStandIn, *, mid_answer: bool, within_s: float) -> tuple[int, bool]:
    """Close every open model socket with 1011; returns how many, and whether a response was streaming then.

    With ``mid_answer`` it first waits (up to ``within_s``) until some connection is streaming a response,
    so the drop cuts an answer; when none comes in time it drops anyway and says so."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while mid_answer and not _answering(standin):
        signal = standin._signal  # replaced on every event sent or received: a response starts with one
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(signal.wait(), remaining)
    answering = _answering(standin)
    sockets = [ws for ws in list(standin._sockets) if not ws.closed]
    for conn in standin.connections:
        conn.close()  # stop streaming now, as a server that went away would
    await asyncio.gather(
        *(ws.close(code=WSCloseCode.INTERNAL_ERROR, message=b"server error") for ws in sockets),
        return_exceptions=True,
    )
    logger.info("dropped %d model connection(s) on request (mid-answer: %s)", len(sockets), answering)
    return len(sockets), answering


def add_fault_routes(app: web.Application, standin: RealtimeStandIn) -> None:
    async def handler(request: web.Request) -> web.Response:
        try:
            body = await request.json() if request.can_read_body else {}
        except ValueError:
            return web.json_response({"error": "expected a JSON body"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "expected a JSON object"}, status=400)
        try:
            within_s = float(body.get("within_s", 30.0))
        except (TypeError, ValueError):
            return web.json_response({"error": "within_s must be a number"}, status=400)
        if not 0 <= within_s <= MAX_WAIT_S:
            return web.json_response({"error": f"within_s must be between 0 and {MAX_WAIT_S:.0f}"}, status=400)
        dropped, answering = await drop_connections(
            standin, mid_answer=bool(body.get("mid_answer", False)), within_s=within_s
        )
        return web.json_response({"dropped": dropped, "mid_answer": answering})

    app.router.add_post("/control/drop_connections", handler)
