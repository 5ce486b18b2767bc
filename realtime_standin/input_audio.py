"""The input audio buffer and turn detection: ``input_audio_buffer.*`` and the user's turns.

Audio appended by the client feeds the VAD; a detected (or test-injected) turn is announced,
committed as a user item, transcribed by the transcript provider and, as the session's
``turn_detection`` asks, answered with a new response or used to barge in on the active one.
That is why these handlers build on :class:`~realtime_standin.responses.ResponseHandlers`.
"""

from __future__ import annotations

import base64
import binascii

from . import protocol as p
from .protocol import JsonDict
from .responses import ResponseHandlers
from .tone import CHUNK_MS
from .vad import VadEvent

MIN_COMMIT_MS = 100


class InputAudioHandlers(ResponseHandlers):
    # -- client events --------------------------------------------------------------------------

    def _on_audio_append(self, event: JsonDict) -> None:
        audio = event.get("audio")
        if not isinstance(audio, str):
            self._missing(event, "audio")
            return
        try:
            pcm = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            self._reject(
                event,
                "Invalid 'audio'. Expected base64-encoded audio bytes.",
                code="invalid_value",
                param="audio",
            )
            return
        self._audio_buffer.extend(pcm)
        if self.turn_detection is None:
            return
        for vad_event in self._vad.process(pcm):
            self._on_vad(vad_event)
        if not self.speaking:
            self._trim_idle_buffer(self.turn_detection)

    def _trim_idle_buffer(self, turn_detection: JsonDict) -> None:
        """Only the prefix padding before a turn matters; keep the buffer bounded while idle."""
        keep = int(turn_detection.get("prefix_padding_ms") or 300) * p.BYTES_PER_MS
        if len(self._audio_buffer) > keep:
            del self._audio_buffer[: len(self._audio_buffer) - keep]

    def _on_audio_commit(self, event: JsonDict) -> None:
        buffered_ms = len(self._audio_buffer) // p.BYTES_PER_MS
        if buffered_ms < MIN_COMMIT_MS:
            self._reject(
                event,
                "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
                f"but buffer only has {float(buffered_ms):.2f}ms of audio.",
                code="input_audio_buffer_commit_empty",
            )
            return
        item_id = self._speech_item_id or p.new_id("item_")
        self._speech_item_id = None
        self._vad.reset()
        self._commit(item_id, transcript=None, duration_ms=buffered_ms)

    def _on_audio_clear(self, event: JsonDict) -> None:
        self._audio_buffer.clear()
        self._speech_item_id = None
        self._vad.reset()
        self.emit(p.buffer_cleared())

    # -- turns ----------------------------------------------------------------------------------

    def _on_vad(self, vad_event: VadEvent) -> None:
        td = self.turn_detection or {}
        if vad_event.kind == "start":
            padding = int(td.get("prefix_padding_ms") or 0)
            self.begin_speech(max(0, vad_event.at_ms - padding))
        else:
            silence = int(td.get("silence_duration_ms") or self.options.vad_stop_ms)
            self.end_speech(transcript=None, audio_end_ms=vad_event.at_ms + min(silence, self.options.vad_stop_ms))

    def begin_speech(self, audio_start_ms: int | None = None) -> str:
        """Speech detected (by the VAD or injected by a test): announce it, barge in if needed."""
        if self._speech_item_id is not None:
            return self._speech_item_id
        self._speech_item_id = p.new_id("item_")
        self._speech_start_ms = self._vad.processed_ms if audio_start_ms is None else audio_start_ms
        self.emit(p.speech_started(self._speech_start_ms, self._speech_item_id))
        response = self.active_response
        if response is not None and response.in_conversation and self._server_interrupts():
            self.cancel_response(reason="turn_detected")
        return self._speech_item_id

    def _server_interrupts(self) -> bool:
        if self.options.server_interrupts is not None:
            return self.options.server_interrupts
        td = self.turn_detection
        return bool(td and td.get("interrupt_response", True))

    def end_speech(self, *, transcript: str | None, audio_end_ms: int | None = None) -> str:
        """Speech over: stop, commit the turn, transcribe it and maybe start the reply."""
        item_id = self.begin_speech() if self._speech_item_id is None else self._speech_item_id
        end_ms = max(self._speech_start_ms, self._vad.processed_ms if audio_end_ms is None else audio_end_ms)
        self.emit(p.speech_stopped(end_ms, item_id))
        self._speech_item_id = None
        self._vad.reset()
        self._commit(item_id, transcript=transcript, duration_ms=max(end_ms - self._speech_start_ms, CHUNK_MS))
        td = self.turn_detection
        if td and td.get("create_response", True) and self.active_response is None:
            self.start_response({}, client_event_id=None)
        return item_id

    def _commit(self, item_id: str, *, transcript: str | None, duration_ms: int) -> None:
        audio = bytes(self._audio_buffer)
        self._audio_buffer.clear()
        previous = self.conversation.tail_id
        self.emit(p.buffer_committed(item_id, previous))
        item = p.user_audio_item(item_id)
        self.conversation.insert(item, None)
        self.emit(p.conversation_item_added(item, previous))
        self.emit(p.conversation_item_done(item, previous))
        text = transcript if transcript is not None else self.options.transcripts.transcribe(audio, duration_ms)
        item["content"][0]["transcript"] = text
        if self.session.get("audio", {}).get("input", {}).get("transcription") is not None:
            self.emit(p.transcription_completed(item_id, text, duration_ms))
