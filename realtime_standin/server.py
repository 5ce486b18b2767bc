# ruff: noqa: ASYNC109  (the waiters take a plain timeout= on purpose: it reads best in tests)
"""The stand-in server: WebSocket endpoint, HTTP control API and the in-process test handle.

``RealtimeStandIn`` serves ``/v1/realtime`` so that an unmodified OpenAI Realtime client pointed at
``base_url=http://127.0.0.1:PORT/v1`` talks to it, plus a small loopback-only control surface
(``/control/*``, ``/healthz``) for tests and for the product's rehearsal mode running it as a
subprocess. Conversation text is never logged: logs carry event types only.
"""

from __future__ import annotations

import asyncio
import copy
import ipaddress
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import WSMsgType, web

from . import protocol as p
from .policy import (
    DEFAULT_FALLBACK_TRANSCRIPT,
    DEFAULT_TOOL_NAME,
    LegalResearchPolicy,
    ResponsePolicy,
    ScriptedCall,
    ScriptedTranscripts,
    TranscriptProvider,
)
from .session import ConnectionOptions, RealtimeConnection

JsonDict = dict[str, Any]
EventPredicate = Callable[[JsonDict], bool]

logger = logging.getLogger("realtime_standin")

REALTIME_PATH = "/v1/realtime"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RealtimeStandIn:
    """A local OpenAI Realtime server for tests and rehearsal mode.

    Usage::

        async with RealtimeStandIn(speed=20.0) as standin:
            model = openai.realtime.RealtimeModel(base_url=standin.base_url, api_key="test")
            ...
            await standin.wait_for_client_event("response.create")
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        transcripts: Iterable[str] = (),
        fallback_transcript: str = DEFAULT_FALLBACK_TRANSCRIPT,
        transcript_provider: TranscriptProvider | None = None,
        policy: ResponsePolicy | None = None,
        tool_name: str = DEFAULT_TOOL_NAME,
        speed: float = 1.0,
        ms_per_char: int = 60,
        tone_amplitude: float = 0.03,
        vad_threshold: float = 0.02,
        vad_start_ms: int = 60,
        vad_stop_ms: int = 500,
        server_interrupts: bool | None = None,
        function_call_delay: float = 0.0,
        keep_audio_payloads: bool = False,
    ) -> None:
        if not is_loopback(host):
            raise ValueError("the stand-in only listens on a loopback address")
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self.transcripts = transcript_provider or ScriptedTranscripts(transcripts, fallback_transcript)
        self.policy: ResponsePolicy = policy or LegalResearchPolicy(tool_name)
        if isinstance(self.policy, LegalResearchPolicy):
            self.policy.function_call_delay_s = function_call_delay
        self.options = ConnectionOptions(
            policy=self.policy,
            transcripts=self.transcripts,
            speed=speed,
            ms_per_char=ms_per_char,
            tone_amplitude=tone_amplitude,
            vad_threshold=vad_threshold,
            vad_start_ms=vad_start_ms,
            vad_stop_ms=vad_stop_ms,
            server_interrupts=server_interrupts,
        )
        self.keep_audio_payloads = keep_audio_payloads
        self.received: list[JsonDict] = []
        """Every client event, in arrival order (audio payloads elided unless kept)."""
        self.sent: list[JsonDict] = []
        """Every server event, in send order (audio deltas elided)."""
        self.connections: list[RealtimeConnection] = []
        self.rejected_handshakes = 0
        self._signal = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._sockets: set[web.WebSocketResponse] = set()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(REALTIME_PATH, self._ws_handler)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/control/events", self._control_events)
        app.router.add_post("/control/speech_started", self._control_speech_started)
        app.router.add_post("/control/user_turn", self._control_user_turn)
        app.router.add_post("/control/function_call", self._control_function_call)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._requested_port)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        logger.info("realtime stand-in listening on port %s", self._port)

    async def stop(self) -> None:
        for conn in self.connections:
            conn.close()
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> RealtimeStandIn:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("stand-in not started")
        return self._port

    @property
    def base_url(self) -> str:
        """The value for ``RealtimeModel(base_url=...)``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    # -- test-control surface -------------------------------------------------------------------

    @property
    def connection(self) -> RealtimeConnection:
        """The most recent open connection (the one the injections act on)."""
        for conn in reversed(self.connections):
            if not conn.closed:
                return conn
        raise RuntimeError("no client is connected")

    @property
    def response_create_count(self) -> int:
        return sum(1 for e in self.received if e.get("type") == "response.create")

    def client_events(self, event_type: str | None = None) -> list[JsonDict]:
        return [e for e in self.received if event_type is None or e.get("type") == event_type]

    def server_events(self, event_type: str | None = None) -> list[JsonDict]:
        return [e for e in self.sent if event_type is None or e.get("type") == event_type]

    def mark(self) -> tuple[int, int]:
        """Positions in (received, sent) to pass as ``after=`` to only see later events."""
        return len(self.received), len(self.sent)

    async def wait_for_client_event(
        self, event_type: str, predicate: EventPredicate | None = None, *, timeout: float = 5.0, after: int = 0
    ) -> JsonDict:
        """First client event of ``event_type`` (at index >= ``after``) matching ``predicate``."""
        return await self._wait(self.received, event_type, predicate, timeout, after)

    async def wait_for_server_event(
        self, event_type: str, predicate: EventPredicate | None = None, *, timeout: float = 5.0, after: int = 0
    ) -> JsonDict:
        return await self._wait(self.sent, event_type, predicate, timeout, after)

    async def wait_for_connection(self, *, timeout: float = 5.0) -> RealtimeConnection:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            signal = self._signal
            try:
                return self.connection
            except RuntimeError:
                pass
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError("no client connected")
            await asyncio.wait_for(signal.wait(), remaining)

    async def inject_speech_started(self) -> str:
        """Act as if the server VAD heard the user start speaking; returns the turn's item id.

        Emits ``input_audio_buffer.speech_started`` and, while a response is active and the
        session has ``interrupt_response`` on, cancels it (``response.done`` cancelled,
        ``turn_detected``), exactly as the audio path does.
        """
        return self.connection.begin_speech()

    async def inject_user_turn(self, transcript: str) -> str:
        """Act as if the user said ``transcript`` and stopped: the full VAD turn sequence.

        speech_started (unless already speaking), speech_stopped, committed, item added/done,
        transcription completed (when the session transcribes), then a response when the
        session's turn detection has ``create_response``.
        """
        return self.connection.end_speech(transcript=transcript)

    def script_function_call(
        self,
        *,
        arguments: str | JsonDict | None = None,
        call_id: str | None = None,
        name: str | None = None,
        delay: float = 0.0,
    ) -> None:
        """Override the next function call: its arguments, call_id (reuse one to test duplicate
        ids), function name, or a delay before it is emitted. Queued; one per call."""
        if not isinstance(self.policy, LegalResearchPolicy):
            raise TypeError("function calls can only be scripted on the default policy")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        self.policy.script_function_call(ScriptedCall(arguments=arguments, call_id=call_id, name=name, delay_s=delay))

    @property
    def function_call_delay(self) -> float:
        """Seconds every function call waits before it is emitted (after ``response.created``)."""
        return self.policy.function_call_delay_s if isinstance(self.policy, LegalResearchPolicy) else 0.0

    @function_call_delay.setter
    def function_call_delay(self, seconds: float) -> None:
        if isinstance(self.policy, LegalResearchPolicy):
            self.policy.function_call_delay_s = seconds

    def push_transcripts(self, *transcripts: str) -> None:
        """Queue transcripts for the next audio turns (default transcript provider only)."""
        if not isinstance(self.transcripts, ScriptedTranscripts):
            raise TypeError("transcripts can only be queued on the default provider")
        self.transcripts.push(*transcripts)

    # -- internals ------------------------------------------------------------------------------

    async def _wait(
        self, log: list[JsonDict], event_type: str, predicate: EventPredicate | None, timeout: float, after: int
    ) -> JsonDict:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        index = after
        while True:
            signal = self._signal
            while index < len(log):
                event = log[index]
                index += 1
                if event.get("type") == event_type and (predicate is None or predicate(event)):
                    return event
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"no {event_type} event within {timeout}s")
            try:
                await asyncio.wait_for(signal.wait(), remaining)
            except TimeoutError:
                continue

    def _notify(self) -> None:
        self._signal.set()
        self._signal = asyncio.Event()

    def _record_received(self, event: JsonDict) -> None:
        if event.get("type") == "input_audio_buffer.append" and not self.keep_audio_payloads:
            audio = event.get("audio")
            event = {**event, "audio": "", "audio_b64_len": len(audio) if isinstance(audio, str) else 0}
        self.received.append(event)
        logger.debug("client event %s", event.get("type"))
        self._notify()

    def _record_sent(self, event: JsonDict) -> None:
        if event.get("type") == "response.output_audio.delta":
            event = {**event, "delta": ""}
        else:
            event = copy.deepcopy(event)
        self.sent.append(event)
        self._notify()

    @staticmethod
    def _auth_ok(request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and bool(token.strip())

    async def _ws_handler(self, request: web.Request) -> web.StreamResponse:
        if not self._auth_ok(request):
            self.rejected_handshakes += 1
            self._notify()
            return web.json_response(
                {
                    "error": {
                        "message": "You didn't provide an API key. You need to provide your API key in an "
                        "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                },
                status=401,
            )
        ws = web.WebSocketResponse(heartbeat=None, max_msg_size=16 * 1024 * 1024)
        await ws.prepare(request)
        self._sockets.add(ws)
        outbox: asyncio.Queue[JsonDict | None] = asyncio.Queue()

        def send(event: JsonDict) -> None:
            self._record_sent(event)
            logger.debug("server event %s", event.get("type"))
            outbox.put_nowait(event)

        conn = RealtimeConnection(model=request.query.get("model", "gpt-realtime"), options=self.options, send=send)
        self.connections.append(conn)
        logger.info("client connected (connection %d)", len(self.connections))

        async def writer() -> None:
            while (event := await outbox.get()) is not None:
                if ws.closed:
                    return
                await ws.send_str(json.dumps(event, ensure_ascii=False))

        writer_task = asyncio.create_task(writer(), name="standin-writer")
        conn.start()
        self._notify()
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                try:
                    event = json.loads(msg.data)
                except ValueError:
                    conn.handle(msg.data)  # answers with an error event
                    continue
                if isinstance(event, dict):
                    self._record_received(event)
                conn.handle(event)
        finally:
            conn.close()
            outbox.put_nowait(None)
            writer_task.cancel()
            await asyncio.gather(writer_task, return_exceptions=True)
            self._sockets.discard(ws)
            self._notify()
            logger.info("client disconnected")
        return ws

    async def _healthz(self, request: web.Request) -> web.Response:
        open_connections = sum(1 for c in self.connections if not c.closed)
        return web.json_response({"ok": True, "connections": open_connections})

    async def _control_events(self, request: web.Request) -> web.Response:
        try:
            since = int(request.query.get("since", "0"))
        except ValueError:
            return web.json_response({"error": "since must be an integer"}, status=400)
        return web.json_response([p.summarize_client_event(e) for e in self.received[since:]])

    async def _control_speech_started(self, request: web.Request) -> web.Response:
        try:
            item_id = await self.inject_speech_started()
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
            item_id = await self.inject_user_turn(transcript)
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
            self.script_function_call(
                arguments=body.get("arguments"),
                call_id=body.get("call_id"),
                name=body.get("name"),
                delay=float(body.get("delay", 0.0)),
            )
        except (TypeError, ValueError) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"ok": True})
