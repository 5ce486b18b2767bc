# ruff: noqa: ASYNC109  (the waiters take a plain timeout= on purpose: it reads best in tests)
"""The stand-in server: ``RealtimeStandIn``, the in-process test handle, and its lifecycle.

``RealtimeStandIn`` serves ``/v1/realtime`` so that an unmodified OpenAI Realtime client pointed at
``base_url=http://127.0.0.1:PORT/v1`` talks to it, plus a small loopback-only control surface
(``/control/*``, ``/healthz``) for tests and for the product's rehearsal mode running it as a
subprocess. Conversation text is never logged: logs carry event types only.

The WebSocket endpoint (:mod:`.endpoint`), the record of the wire (:mod:`.event_log`) and the
HTTP control routes (:mod:`.control_api`) live in their own modules; this one owns configuration,
start/stop and the injections a test (or the control API) makes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
from collections import deque
from collections.abc import Iterable

from aiohttp import web

from .control_api import ControlApi
from .endpoint import RealtimeEndpoint
from .event_log import EventPredicate
from .event_record import EventRecord
from .fault_control import add_fault_routes
from .options import ConnectionOptions
from .policy import (
    DEFAULT_FALLBACK_TRANSCRIPT,
    DEFAULT_TOOL_NAME,
    LegalResearchPolicy,
    ResponsePolicy,
    ScriptedCall,
    ScriptedTranscripts,
    TranscriptProvider,
)
from .protocol import JsonDict
from .session import RealtimeConnection
from .timings import TurnTimings

__all__ = ["REALTIME_PATH", "EventPredicate", "JsonDict", "RealtimeStandIn", "is_loopback"]

logger = logging.getLogger("realtime_standin")

REALTIME_PATH = "/v1/realtime"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RealtimeStandIn(RealtimeEndpoint):
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
        self.received = EventRecord()
        """Client events, in arrival order (audio payloads elided unless kept; bounded, see :mod:`.endpoint`)."""
        self.sent = EventRecord()
        """Server events, in send order (audio deltas elided; bounded like ``received``)."""
        self.connections: list[RealtimeConnection] = []
        self.opened_connections = 0
        self._closed: deque[tuple[int, RealtimeConnection]] = deque()
        self.rejected_handshakes = 0
        self.timings = TurnTimings()
        """When turns ended and answers went out, per connection (``/control/timings``)."""
        self._signal = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._sockets: set[web.WebSocketResponse] = set()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(REALTIME_PATH, self._ws_handler)
        ControlApi(self).add_routes(app)
        add_fault_routes(app, self)
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

    # -- test-control surface (the waiters and event lists come from EventLog) -------------------

    @property
    def connection(self) -> RealtimeConnection:
        """The most recent open connection (the one the injections act on)."""
        for conn in reversed(self.connections):
            if not conn.closed:
                return conn
        raise RuntimeError("no client is connected")

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
