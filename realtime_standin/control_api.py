"""The loopback HTTP control surface: ``/healthz`` and ``/control/*``.

End-to-end tests and the product's rehearsal mode run the stand-in as a subprocess, so they
cannot call its Python test handle; these routes expose the same injections over HTTP. They only
use the stand-in's public API, and ``/control/events`` returns text-free summaries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from . import protocol as p

if TYPE_CHECKING:
    from .server import RealtimeStandIn


class ControlApi:
    """HTTP handlers over one :class:`~realtime_standin.server.RealtimeStandIn`."""

    def __init__(self, standin: RealtimeStandIn) -> None:
        self.standin = standin

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/control/events", self._control_events)
        app.router.add_get("/control/timings", self._control_timings)
        app.router.add_post("/control/speech_started", self._control_speech_started)
        app.router.add_post("/control/user_turn", self._control_user_turn)
        app.router.add_post("/control/function_call", self._control_function_call)

    async def _healthz(self, request: web.Request) -> web.Response:
        open_connections = sum(1 for c in self.standin.connections if not c.closed)
        return web.json_response({"ok": True, "connections": open_connections})

    async def _control_events(self, request: web.Request) -> web.Response:
        try:
            since = int(request.query.get("since", "0"))
        except ValueError:
            return web.json_response({"error": "since must be an integer"}, status=400)
        return web.json_response([p.summarize_client_event(e) for e in self.standin.received[since:]])

    async def _control_timings(self, request: web.Request) -> web.Response:
        """The turn timings (kinds, ids, monotonic times; no text) from absolute position `since` on."""
        try:
            since = int(request.query.get("since", "0"))
        except ValueError:
            return web.json_response({"error": "since must be an integer"}, status=400)
        timings = self.standin.timings
        return web.json_response(
            {"next": timings.total, "connections": self.standin.opened_connections, "entries": timings.since(since)}
        )

    async def _control_speech_started(self, request: web.Request) -> web.Response:
        try:
            item_id = await self.standin.inject_speech_started()
        except RuntimeError as e:
            return web.json_response({"error": str(e)}, status=409)
        return web.json_response({"item_id": item_id})

    async def _control_user_turn(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": "expected a JSON body"}, status=400)
        transcript = body.get("transcript") if isinstance(body, dict) else None
        if not isinstance(transcript, str) or not transcript.strip():
            return web.json_response({"error": "transcript must be a non-empty string"}, status=400)
        try:
            item_id = await self.standin.inject_user_turn(transcript)
        except RuntimeError as e:
            return web.json_response({"error": str(e)}, status=409)
        return web.json_response({"item_id": item_id})

    async def _control_function_call(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": "expected a JSON body"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "expected a JSON object"}, status=400)
        try:
            self.standin.script_function_call(
                arguments=body.get("arguments"),
                call_id=body.get("call_id"),
                name=body.get("name"),
                delay=float(body.get("delay", 0.0)),
            )
        except (TypeError, ValueError) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"ok": True})
