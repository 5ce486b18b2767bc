"""Responses: ``response.create``/``response.cancel`` and the task that streams each response.

A response runs as its own task that only yields between complete output steps, which is what
lets a cancellation (client ``response.cancel`` or a server-side barge-in) close the response
synchronously and deterministically: the task never resumes after it is cancelled. What a
response says comes from the policy (speak a text, or call a function); how it is streamed,
paced and closed is decided here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from typing import Any

from . import protocol as p
from .connection_state import ActiveResponse, ConnectionState
from .policy import FunctionCallPlan, PolicyContext, SpeakPlan
from .protocol import JsonDict
from .tone import CHUNK_MS

logger = logging.getLogger("realtime_standin")


class ResponseHandlers(ConnectionState):
    # -- client events --------------------------------------------------------------------------

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

    # -- lifecycle ------------------------------------------------------------------------------

    def start_response(self, params: JsonDict, *, client_event_id: str | None) -> None:
        response = self._new_response(params)
        self.active_response = response
        self.emit(p.response_created(self._resource(response, "in_progress")))
        plan = self.options.policy.decide(self._policy_context(response, params))
        response.task = asyncio.get_running_loop().create_task(
            self._run(response, plan), name=f"response {response.id}"
        )

    def _new_response(self, params: JsonDict) -> ActiveResponse:
        """The response a ``response.create`` asks for, with unset parameters taken from the session."""
        session = self.session
        modalities = params.get("output_modalities") or session.get("output_modalities") or ["audio"]
        voice = (params.get("audio") or {}).get("output", {}).get("voice") or session["audio"]["output"].get("voice")
        metadata = params.get("metadata") if isinstance(params.get("metadata"), dict) else None
        return ActiveResponse(
            id=p.new_id("resp_"),
            metadata=metadata,
            modalities=list(modalities),
            voice=voice,
            max_output_tokens=params.get("max_output_tokens") or session.get("max_output_tokens") or "inf",
            in_conversation=params.get("conversation", "auto") != "none",
        )

    def _policy_context(self, response: ActiveResponse, params: JsonDict) -> PolicyContext:
        session = self.session
        return PolicyContext(
            items=self.conversation.items if response.in_conversation else list(params.get("input") or []),
            tools=params.get("tools") if params.get("tools") is not None else session.get("tools") or [],
            tool_choice=params.get("tool_choice") or session.get("tool_choice"),
            instructions=params.get("instructions") or session.get("instructions"),
            response_params=params,
        )

    def _resource(self, response: ActiveResponse, status: str, **extra: Any) -> JsonDict:
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

    async def _run(self, response: ActiveResponse, plan: FunctionCallPlan | SpeakPlan) -> None:
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

    def _finish(self, response: ActiveResponse, status: str, status_details: JsonDict | None) -> None:
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

    # -- output items ---------------------------------------------------------------------------

    def _add_output_item(self, response: ActiveResponse, item: JsonDict) -> None:
        response.item = item
        response.output.append(item)
        self.emit(p.output_item_added(response.id, 0, item))
        previous = self.conversation.tail_id
        if response.in_conversation:
            self.conversation.insert(item, None)
        self.emit(p.conversation_item_added(item, previous))

    def _close_output_item(self, response: ActiveResponse, status: str) -> None:
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

    async def _run_function_call(self, response: ActiveResponse, plan: FunctionCallPlan) -> None:
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

    async def _run_speech(self, response: ActiveResponse, text: str) -> None:
        audio = "audio" in response.modalities
        item = p.assistant_message_item(p.new_id("item_"))
        self._open_message(response, item, audio)
        words = text.split(" ")
        total_ms = max(500, len(text) * self.options.ms_per_char)
        chunks = max(1, math.ceil(total_ms / CHUNK_MS))
        pace = CHUNK_MS / 1000 / max(self.options.speed, 1e-3)
        for index in range(chunks):
            lo, hi = len(words) * index // chunks, len(words) * (index + 1) // chunks
            self._stream_chunk(response, item, " ".join(words[lo:hi]), audio)
            await asyncio.sleep(pace)
        self._close_message(response, "completed")
        self._finish(response, "completed", None)

    def _open_message(self, response: ActiveResponse, item: JsonDict, audio: bool) -> None:
        self._add_output_item(response, item)
        part: JsonDict = {"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""}
        self.emit(p.content_part_added(response.id, item["id"], 0, part))
        response.part_open = True
        if audio:
            self._audio_ms_by_item[item["id"]] = 0

    def _stream_chunk(self, response: ActiveResponse, item: JsonDict, delta: str, audio: bool) -> None:
        """One 100 ms step of a message: its share of the text, then (when speaking) its audio."""
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

    def _close_message(self, response: ActiveResponse, status: str) -> None:
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
