"""The state one Realtime connection works on, and the single way its server events leave.

Every client-event handler of :class:`~realtime_standin.session.RealtimeConnection` builds on
:class:`ConnectionState`: it owns the session config, the conversation, the input audio buffer,
the active response and ``emit``, the synchronous send that keeps wire order equal to call order.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from dataclasses import dataclass, field

from . import protocol as p
from .conversation import Conversation
from .options import ConnectionOptions
from .protocol import JsonDict
from .tone import tone_chunk
from .vad import EnergyVad


@dataclass
class ActiveResponse:
    """A response in progress: what it was asked for and what it has streamed so far."""

    id: str
    metadata: JsonDict | None
    modalities: list[str]
    voice: str | None
    max_output_tokens: int | str
    in_conversation: bool
    task: asyncio.Task[None] | None = None
    item: JsonDict | None = None
    output: list[JsonDict] = field(default_factory=list)
    text_sent: str = ""
    audio_ms: int = 0
    part_open: bool = False


class ConnectionState:
    """Session, conversation, input audio and the active response of one connection."""

    def __init__(
        self,
        *,
        model: str,
        options: ConnectionOptions,
        send: Callable[[JsonDict], None],
    ) -> None:
        self.model = model
        self.options = options
        self._send = send
        self.session = p.default_session(model)
        self.conversation = Conversation()
        self.conversation_id = p.new_id("conv_")
        self._audio_buffer = bytearray()
        self._vad = self._new_vad()
        self._speech_item_id: str | None = None
        self._speech_start_ms = 0
        self._audio_ms_by_item: dict[str, int] = {}
        self.active_response: ActiveResponse | None = None
        self._tone_b64 = base64.b64encode(tone_chunk(options.tone_amplitude)).decode("ascii")
        self.closed = False

    def _new_vad(self) -> EnergyVad:
        o = self.options
        return EnergyVad(threshold=o.vad_threshold, start_ms=o.vad_start_ms, stop_ms=o.vad_stop_ms)

    def emit(self, event: JsonDict) -> None:
        if not self.closed:
            self._send(event)

    def start(self) -> None:
        self.emit(p.session_created(self.session))

    def close(self) -> None:
        """Connection gone: stop any response without emitting (there is no one to tell).

        Its input audio is let go as well: a closed connection stays readable for a while (its
        session, its conversation) but will never commit a turn again."""
        self.closed = True
        if self.active_response and self.active_response.task:
            self.active_response.task.cancel()
        self.active_response = None
        self._audio_buffer = bytearray()

    @property
    def turn_detection(self) -> JsonDict | None:
        td = self.session.get("audio", {}).get("input", {}).get("turn_detection")
        return td if isinstance(td, dict) else None

    @property
    def speaking(self) -> bool:
        return self._speech_item_id is not None

    def _reject(
        self,
        event: JsonDict,
        message: str,
        *,
        code: str | None,
        param: str | None = None,
        error_type: str = "invalid_request_error",
    ) -> None:
        """Answer a client event with an `error` that names it, as the real API does."""
        self.emit(
            p.error(message, code=code, client_event_id=event.get("event_id"), param=param, error_type=error_type)
        )

    def _missing(self, event: JsonDict, param: str) -> None:
        self._reject(
            event,
            f"Missing required parameter: '{param}'.",
            code="missing_required_parameter",
            param=param,
        )
