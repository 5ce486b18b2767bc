"""One Realtime connection: session config, conversation, input audio, responses.

Client events are handled one at a time, in arrival order, by :meth:`RealtimeConnection.handle`;
server events go out through a single ordered queue (``emit`` is synchronous), so the order
in which this module calls ``emit`` is exactly the order on the wire. A response runs as its own
task that only yields between complete output steps, which is what lets a cancellation (client
``response.cancel`` or a server-side barge-in) close the response synchronously and
deterministically: the task never resumes after it is cancelled.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import protocol as p
from .conversation import Conversation, DuplicateItemError, ItemNotFoundError
from .policy import FunctionCallPlan, PolicyContext, ResponsePolicy, SpeakPlan, TranscriptProvider
from .vad import EnergyVad, VadEvent

JsonDict = dict[str, Any]

logger = logging.getLogger("realtime_standin")

CHUNK_MS = 100
MIN_COMMIT_MS = 100


@dataclass
class ConnectionOptions:
    """Knobs shared by every connection of one stand-in (see :class:`RealtimeStandIn`)."""

    policy: ResponsePolicy
    transcripts: TranscriptProvider
    speed: float = 1.0
    """Pacing factor for streamed output: 1.0 is real time, 20.0 streams 20x faster."""
    ms_per_char: int = 60
    """Length of spoken audio per character of text (about 15 characters per second)."""
    tone_amplitude: float = 0.03
    """Level of the tone that stands in for speech (0 gives silence)."""
    vad_threshold: float = 0.02
    vad_start_ms: int = 60
    vad_stop_ms: int = 500
    server_interrupts: bool | None = None
    """Cancel the active response when speech starts. None follows the session's
    ``turn_detection.interrupt_response``, as the real API does."""


@dataclass
class _ActiveResponse:
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


def _tone_chunk(amplitude: float) -> bytes:
    """100 ms of a 220 Hz sine (exactly 22 cycles, so chunks join without clicks)."""
    samples = SAMPLES_PER_CHUNK
    level = max(0.0, min(1.0, amplitude)) * 32767
    data = array("h", (int(level * math.sin(2 * math.pi * 220 * n / p.SAMPLE_RATE)) for n in range(samples)))
    return data.tobytes()


SAMPLES_PER_CHUNK = p.SAMPLE_RATE * CHUNK_MS // 1000


class RealtimeConnection:
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
        self.active_response: _ActiveResponse | None = None
        self._tone_b64 = base64.b64encode(_tone_chunk(options.tone_amplitude)).decode("ascii")
        self.closed = False

    # -- plumbing -------------------------------------------------------------------------------

    def _new_vad(self) -> EnergyVad:
        o = self.options
        return EnergyVad(threshold=o.vad_threshold, start_ms=o.vad_start_ms, stop_ms=o.vad_stop_ms)

    def emit(self, event: JsonDict) -> None:
        if not self.closed:
            self._send(event)

    def start(self) -> None:
        self.emit(p.session_created(self.session))

    def close(self) -> None:
        """Connection gone: stop any response without emitting (there is no one to tell)."""
        self.closed = True
        if self.active_response and self.active_response.task:
            self.active_response.task.cancel()
        self.active_response = None

    @property
    def turn_detection(self) -> JsonDict | None:
        td = self.session.get("audio", {}).get("input", {}).get("turn_detection")
        return td if isinstance(td, dict) else None

    @property
    def speaking(self) -> bool:
        return self._speech_item_id is not None

    # -- dispatch -------------------------------------------------------------------------------

    def handle(self, raw: str | JsonDict) -> None:
        if isinstance(raw, str):
            try:
                event = json.loads(raw)
            except ValueError:
                self.emit(p.error("The server could not parse the JSON payload.", code="invalid_json"))
                return
        else:
            event = raw
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            self.emit(p.error("Missing required parameter: 'type'.", code="missing_required_parameter", param="type"))
            return
        handler = self._handlers().get(event["type"])
        if handler is None:
            self._reject(
                event,
                f"Invalid value: '{event['type']}'. Supported values are: {', '.join(sorted(self._handlers()))}.",
                code="invalid_value",
                param="type",
            )
            return
        try:
            handler(event)
        except Exception as e:  # a stand-in bug must not take the connection down silently
            logger.error("failed to handle %s: %s", event["type"], type(e).__name__)
            self._reject(
                event,
                "The server had an error while processing your request.",
                code=None,
                error_type="server_error",
            )

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

    def _handlers(self) -> dict[str, Callable[[JsonDict], None]]:
        return {
            "session.update": self._on_session_update,
            "conversation.item.create": self._on_item_create,
            "conversation.item.delete": self._on_item_delete,
            "conversation.item.truncate": self._on_item_truncate,
            "conversation.item.retrieve": self._on_item_retrieve,
            "input_audio_buffer.append": self._on_audio_append,
            "input_audio_buffer.commit": self._on_audio_commit,
            "input_audio_buffer.clear": self._on_audio_clear,
            "response.create": self._on_response_create,
            "response.cancel": self._on_response_cancel,
        }

    def _missing(self, event: JsonDict, param: str) -> None:
        self._reject(
            event,
            f"Missing required parameter: '{param}'.",
            code="missing_required_parameter",
            param=param,
        )

    # -- session --------------------------------------------------------------------------------

    def _on_session_update(self, event: JsonDict) -> None:
        update = event.get("session")
        if not isinstance(update, dict):
            self._missing(event, "session")
            return
        if update.get("type", "realtime") != "realtime":
            self._reject(
                event,
                "Passing a transcription session update event to a realtime session is not allowed.",
                code="invalid_value",
                param="session.type",
            )
            return
        self.session = p.merge_session(self.session, update)
        if self.turn_detection is None:
            self._vad.reset()
        self.emit(p.session_updated(self.session))

    # -- conversation items ---------------------------------------------------------------------

    def _on_item_create(self, event: JsonDict) -> None:
        item = event.get("item")
        if not isinstance(item, dict) or item.get("type") not in ("message", "function_call", "function_call_output"):
            self._reject(
                event,
                "Invalid 'item': expected a message, function_call or function_call_output item.",
                code="invalid_value",
                param="item",
            )
            return
        required = {
            "message": ("role", "content"),
            "function_call": ("call_id", "name", "arguments"),
            "function_call_output": ("call_id", "output"),
        }[item["type"]]
        for key in required:
            if item.get(key) is None:
                self._missing(event, f"item.{key}")
                return
        stored = {**item, "id": item.get("id") or p.new_id("item_"), "object": "realtime.item", "status": "completed"}
        try:
            previous = self.conversation.insert(stored, event.get("previous_item_id"))
        except DuplicateItemError:
            self._reject(
                event,
                f"Item with item_id '{stored['id']}' already exists.",
                code="item_create_duplicate_item_id",
                param="item.id",
            )
            return
        except ItemNotFoundError:
            self._reject(
                event,
                f"Error adding item: the previous item with id '{event.get('previous_item_id')}' does not exist.",
                code="item_create_invalid_previous_item_id",
                param="previous_item_id",
            )
            return
        self.emit(p.conversation_item_added(stored, previous))
        self.emit(p.conversation_item_done(stored, previous))

    def _on_item_delete(self, event: JsonDict) -> None:
        item_id = event.get("item_id")
        if not isinstance(item_id, str):
            self._missing(event, "item_id")
            return
        try:
            self.conversation.delete(item_id)
        except ItemNotFoundError:
            self._reject(
                event,
                f"Error deleting item: the item with id '{item_id}' does not exist.",
                code="item_delete_invalid_item_id",
                param="item_id",
            )
            return
        self._audio_ms_by_item.pop(item_id, None)
        self.emit(p.conversation_item_deleted(item_id))

    def _on_item_retrieve(self, event: JsonDict) -> None:
        item = self.conversation.get(str(event.get("item_id")))
        if item is None:
            self._reject(
                event,
                f"Error retrieving item: the item with id '{event.get('item_id')}' does not exist.",
                code="item_retrieve_invalid_item_id",
                param="item_id",
            )
            return
        self.emit(p.conversation_item_retrieved(item))

    def _on_item_truncate(self, event: JsonDict) -> None:
        item_id = event.get("item_id")
        audio_end_ms = event.get("audio_end_ms")
        content_index = event.get("content_index", 0)
        if not isinstance(item_id, str):
            self._missing(event, "item_id")
            return
        if not isinstance(audio_end_ms, int) or audio_end_ms < 0:
            self._missing(event, "audio_end_ms")
            return
        item = self.conversation.get(item_id)
        client_event_id = event.get("event_id")
        if item is None:
            self.emit(
                p.error(
                    f"Error truncating item: the item with id '{item_id}' does not exist.",
                    code="item_truncate_invalid_item_id",
                    client_event_id=client_event_id,
                    param="item_id",
                )
            )
            return
        if item.get("role") != "assistant" or item_id not in self._audio_ms_by_item:
            self.emit(
                p.error(
                    "Only model output audio messages can be truncated",
                    code="unsupported_content_type",
                    client_event_id=client_event_id,
                    param="item_id",
                )
            )
            return
        available = self._audio_ms_by_item[item_id]
        if audio_end_ms > available:
            self.emit(
                p.error(
                    f"Audio content of {available}ms is already shorter than {audio_end_ms}ms",
                    code="invalid_value",
                    client_event_id=client_event_id,
                    param="audio_end_ms",
                )
            )
            return
        self._audio_ms_by_item[item_id] = audio_end_ms
        # the real API drops the transcript so the context holds nothing the user did not hear
        for part in item.get("content") or []:
            if isinstance(part, dict) and part.get("type") == "output_audio":
                part["transcript"] = ""
        self.emit(p.conversation_item_truncated(item_id, content_index, audio_end_ms))

    # -- input audio ----------------------------------------------------------------------------

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
            # only the prefix padding before a turn matters; keep the buffer bounded while idle
            keep = int(self.turn_detection.get("prefix_padding_ms") or 300) * p.BYTES_PER_MS
            if len(self._audio_buffer) > keep:
                del self._audio_buffer[: len(self._audio_buffer) - keep]

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

    # -- responses ------------------------------------------------------------------------------

    def _on_response_create(self, event: JsonDict) -> None:
        params = event.get("response") if isinstance(event.get("response"), dict) else {}
        if self.active_response is not None:
            # the real API does not set error.event_id on this one
            self.emit(
                p.error(
                    f"Conversation already has an active response in progress: {self.active_response.id}. "
                    "Wait until the response is finished before creating a new one.",
                    code="conversation_already_has_active_response",
                )
            )
            return
        self.start_response(params, client_event_id=event.get("event_id"))

    def _on_response_cancel(self, event: JsonDict) -> None:
        response = self.active_response
        wanted = event.get("response_id")
        if response is None or (wanted and wanted != response.id):
            self._reject(
                event,
                "Cancellation failed: no active response found",
                code="response_cancel_not_active",
            )
            return
        self.cancel_response(reason="client_cancelled")

    def start_response(self, params: JsonDict, *, client_event_id: str | None) -> None:
        session = self.session
        modalities = params.get("output_modalities") or session.get("output_modalities") or ["audio"]
        voice = (params.get("audio") or {}).get("output", {}).get("voice") or session["audio"]["output"].get("voice")
        metadata = params.get("metadata") if isinstance(params.get("metadata"), dict) else None
        response = _ActiveResponse(
            id=p.new_id("resp_"),
            metadata=metadata,
            modalities=list(modalities),
            voice=voice,
            max_output_tokens=params.get("max_output_tokens") or session.get("max_output_tokens") or "inf",
            in_conversation=params.get("conversation", "auto") != "none",
        )
        self.active_response = response
        self.emit(p.response_created(self._resource(response, "in_progress")))
        ctx = PolicyContext(
            items=self.conversation.items if response.in_conversation else list(params.get("input") or []),
            tools=params.get("tools") if params.get("tools") is not None else session.get("tools") or [],
            tool_choice=params.get("tool_choice") or session.get("tool_choice"),
            instructions=params.get("instructions") or session.get("instructions"),
            response_params=params,
        )
        plan = self.options.policy.decide(ctx)
        response.task = asyncio.get_running_loop().create_task(
            self._run(response, plan), name=f"response {response.id}"
        )

    def _resource(self, response: _ActiveResponse, status: str, **extra: Any) -> JsonDict:
        return p.response_resource(
            response.id,
            status=status,
            output_modalities=response.modalities,
            voice=response.voice if "audio" in response.modalities else None,
            metadata=response.metadata,
            conversation_id=self.conversation_id if response.in_conversation else None,
            max_output_tokens=response.max_output_tokens,
            output=response.output,
            **extra,
        )

    async def _run(self, response: _ActiveResponse, plan: FunctionCallPlan | SpeakPlan) -> None:
        try:
            if isinstance(plan, FunctionCallPlan):
                await self._run_function_call(response, plan)
            else:
                await self._run_speech(response, plan.text)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # the exception type only: messages and tracebacks may carry conversation text
            logger.error("response task failed: %s", type(e).__name__)
            if self.active_response is response:
                self._finish(response, "failed", {"type": "failed", "error": {"type": "server_error", "code": None}})

    def _add_output_item(self, response: _ActiveResponse, item: JsonDict) -> None:
        response.item = item
        response.output.append(item)
        self.emit(p.output_item_added(response.id, 0, item))
        previous = self.conversation.tail_id
        if response.in_conversation:
            self.conversation.insert(item, None)
        self.emit(p.conversation_item_added(item, previous))

    def _close_output_item(self, response: _ActiveResponse, status: str) -> None:
        item = response.item
        assert item is not None
        item["status"] = status
        self.emit(p.output_item_done(response.id, 0, item))
        self.emit(p.conversation_item_done(item, self._previous_of(item["id"])))

    def _previous_of(self, item_id: str) -> str | None:
        ids = [i["id"] for i in self.conversation.items]
        if item_id in ids:
            index = ids.index(item_id)
            return ids[index - 1] if index > 0 else None
        return None

    async def _run_function_call(self, response: _ActiveResponse, plan: FunctionCallPlan) -> None:
        if plan.delay_s > 0:
            await asyncio.sleep(plan.delay_s)
        item = p.function_call_item(p.new_id("item_"), plan.call_id or p.new_call_id(), plan.name)
        # emitted in one go: a call cut between output_item.added and .done would reach the client
        # as a completed call with empty arguments (the plugin dispatches every output_item.done)
        self._add_output_item(response, item)
        self.emit(p.function_call_arguments_delta(response.id, item["id"], 0, item["call_id"], plan.arguments))
        item["arguments"] = plan.arguments
        self.emit(
            p.function_call_arguments_done(response.id, item["id"], 0, item["call_id"], plan.name, plan.arguments)
        )
        self._close_output_item(response, "completed")
        response.text_sent = plan.arguments
        self._finish(response, "completed", None)

    async def _run_speech(self, response: _ActiveResponse, text: str) -> None:
        audio = "audio" in response.modalities
        item = p.assistant_message_item(p.new_id("item_"))
        self._add_output_item(response, item)
        part: JsonDict = {"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""}
        self.emit(p.content_part_added(response.id, item["id"], 0, part))
        response.part_open = True
        if audio:
            self._audio_ms_by_item[item["id"]] = 0
        words = text.split(" ")
        total_ms = max(500, len(text) * self.options.ms_per_char)
        chunks = max(1, math.ceil(total_ms / CHUNK_MS))
        pace = CHUNK_MS / 1000 / max(self.options.speed, 1e-3)
        for index in range(chunks):
            lo, hi = len(words) * index // chunks, len(words) * (index + 1) // chunks
            delta = " ".join(words[lo:hi])
            if delta:
                delta = (" " if response.text_sent else "") + delta
                response.text_sent += delta
                if audio:
                    self.emit(p.audio_transcript_delta(response.id, item["id"], 0, delta))
                else:
                    self.emit(p.text_delta(response.id, item["id"], 0, delta))
            if audio:
                self.emit(p.audio_delta(response.id, item["id"], 0, self._tone_b64))
                response.audio_ms += CHUNK_MS
                self._audio_ms_by_item[item["id"]] = response.audio_ms
            await asyncio.sleep(pace)
        self._close_message(response, "completed")
        self._finish(response, "completed", None)

    def _close_message(self, response: _ActiveResponse, status: str) -> None:
        """Emit the done events of a spoken or written message, complete or cut short."""
        item = response.item
        if item is None or item.get("type") != "message" or not response.part_open:
            return
        response.part_open = False
        text = response.text_sent
        if "audio" in response.modalities:
            self.emit(p.audio_done(response.id, item["id"], 0))
            self.emit(p.audio_transcript_done(response.id, item["id"], 0, text))
            part: JsonDict = {"type": "audio", "transcript": text}
            item["content"] = [{"type": "output_audio", "transcript": text}]
        else:
            self.emit(p.text_done(response.id, item["id"], 0, text))
            part = {"type": "text", "text": text}
            item["content"] = [{"type": "output_text", "text": text}]
        self.emit(p.content_part_done(response.id, item["id"], 0, part))
        self._close_output_item(response, status)

    def cancel_response(self, *, reason: str) -> None:
        """Stop the active response now and close it with ``status: cancelled``."""
        response = self.active_response
        if response is None:
            return
        if response.task is not None and not response.task.done():
            response.task.cancel()
        if response.item is not None and response.item.get("type") == "message":
            self._close_message(response, "incomplete")
        elif response.item is not None and response.item.get("status") == "in_progress":
            self._close_output_item(response, "incomplete")
        self._finish(response, "cancelled", {"type": "cancelled", "reason": reason})

    def _finish(self, response: _ActiveResponse, status: str, status_details: JsonDict | None) -> None:
        if self.active_response is not response:
            return
        self.active_response = None
        input_text = sum(len(json.dumps(i.get("content") or i.get("output") or "")) for i in self.conversation.items)
        usage = p.usage(
            input_text_tokens=max(1, input_text // 4),
            input_audio_tokens=0,
            output_text_tokens=max(1, len(response.text_sent) // 4) if response.text_sent else 0,
            output_audio_tokens=response.audio_ms // 50,
        )
        self.emit(p.response_done(self._resource(response, status, status_details=status_details, usage=usage)))
