"""Builders for OpenAI Realtime (GA) server events, ids and error payloads.

Keeping every wire shape in one module makes it easy to compare the stand-in with the
published protocol: one function per server event, named after the event type. The shapes
follow the GA schema (``output_audio``/``output_text`` event names, nested ``audio`` session
config, ``conversation.item.added``/``done``), which is what livekit-agents' OpenAI plugin
parses. Nothing here does I/O.
"""

from __future__ import annotations

import copy
import secrets
import string
import time
from typing import Any

JsonDict = dict[str, Any]

SAMPLE_RATE = 24_000
BYTES_PER_MS = SAMPLE_RATE * 2 // 1000  # PCM16 mono

_ALPHABET = string.ascii_letters + string.digits


def new_id(prefix: str) -> str:
    """An id shaped like the real API's (``resp_``/``item_``/``event_`` + 21 random chars)."""
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(21))


def new_call_id() -> str:
    """Function-call ids are ``call_`` + 16 chars on the real API (the plugin caps them at 32)."""
    return "call_" + "".join(secrets.choice(_ALPHABET) for _ in range(16))


def _event(event_type: str, **fields: Any) -> JsonDict:
    return {"type": event_type, "event_id": new_id("event_"), **fields}


# ---------------------------------------------------------------------------------------------
# session


def default_session(model: str) -> JsonDict:
    """The session a fresh connection starts with, mirroring the real API's defaults."""
    audio_format = {"type": "audio/pcm", "rate": SAMPLE_RATE}
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": new_id("sess_"),
        "model": model,
        "output_modalities": ["audio"],
        "instructions": "",
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": None,
        "truncation": "auto",
        "prompt": None,
        "expires_at": int(time.time()) + 60 * 60,
        "include": None,
        "audio": {
            "input": {
                "format": dict(audio_format),
                "transcription": None,
                "noise_reduction": None,
                "turn_detection": default_turn_detection("server_vad"),
            },
            "output": {"format": dict(audio_format), "voice": "alloy", "speed": 1.0},
        },
    }


def default_turn_detection(kind: str) -> JsonDict:
    if kind == "semantic_vad":
        return {"type": "semantic_vad", "eagerness": "auto", "create_response": True, "interrupt_response": True}
    return {
        "type": "server_vad",
        "threshold": 0.5,
        "prefix_padding_ms": 300,
        "silence_duration_ms": 200,
        "idle_timeout_ms": None,
        "create_response": True,
        "interrupt_response": True,
    }


# keys whose value the real API replaces wholesale on session.update rather than merging into
_REPLACED_KEYS = {"tools", "turn_detection", "transcription", "noise_reduction", "format", "output_modalities"}


def merge_session(current: JsonDict, update: JsonDict) -> JsonDict:
    """Apply a ``session.update`` payload: nested config objects merge, leaf settings replace.

    ``turn_detection`` is replaced (a semantic_vad update must not inherit server_vad's
    threshold) and then completed with the defaults of its type, as the real API reports them.
    """
    merged = copy.deepcopy(current)
    _merge_into(merged, update)
    turn_detection = merged.get("audio", {}).get("input", {}).get("turn_detection")
    if isinstance(turn_detection, dict) and turn_detection.get("type") in ("server_vad", "semantic_vad"):
        merged["audio"]["input"]["turn_detection"] = {
            **default_turn_detection(turn_detection["type"]),
            **{k: v for k, v in turn_detection.items() if v is not None},
        }
    return merged


def _merge_into(target: JsonDict, update: JsonDict) -> None:
    for key, value in update.items():
        if key in ("object", "id", "expires_at"):
            continue  # server-owned fields
        if isinstance(value, dict) and isinstance(target.get(key), dict) and key not in _REPLACED_KEYS:
            _merge_into(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def session_created(session: JsonDict) -> JsonDict:
    return _event("session.created", session=copy.deepcopy(session))


def session_updated(session: JsonDict) -> JsonDict:
    return _event("session.updated", session=copy.deepcopy(session))


# ---------------------------------------------------------------------------------------------
# errors


def error(
    message: str,
    *,
    code: str | None,
    client_event_id: str | None = None,
    param: str | None = None,
    error_type: str = "invalid_request_error",
) -> JsonDict:
    """An ``error`` server event; ``client_event_id`` lets the client match it to its request."""
    return _event(
        "error",
        error={"type": error_type, "code": code, "message": message, "param": param, "event_id": client_event_id},
    )


# ---------------------------------------------------------------------------------------------
# conversation items


def conversation_item_added(item: JsonDict, previous_item_id: str | None) -> JsonDict:
    return _event("conversation.item.added", previous_item_id=previous_item_id, item=public_item(item))


def conversation_item_done(item: JsonDict, previous_item_id: str | None) -> JsonDict:
    return _event("conversation.item.done", previous_item_id=previous_item_id, item=public_item(item))


def conversation_item_deleted(item_id: str) -> JsonDict:
    return _event("conversation.item.deleted", item_id=item_id)


def conversation_item_truncated(item_id: str, content_index: int, audio_end_ms: int) -> JsonDict:
    return _event(
        "conversation.item.truncated", item_id=item_id, content_index=content_index, audio_end_ms=audio_end_ms
    )


def conversation_item_retrieved(item: JsonDict) -> JsonDict:
    return _event("conversation.item.retrieved", item=public_item(item))


def public_item(item: JsonDict) -> JsonDict:
    """The item as the server reports it: audio bytes are never echoed back."""
    out = copy.deepcopy(item)
    for part in out.get("content") or []:
        if isinstance(part, dict) and part.get("type") == "input_audio":
            part.pop("audio", None)
    return out


def user_audio_item(item_id: str) -> JsonDict:
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "status": "completed",
        "role": "user",
        "content": [{"type": "input_audio", "transcript": None}],
    }


def assistant_message_item(item_id: str) -> JsonDict:
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }


def function_call_item(item_id: str, call_id: str, name: str) -> JsonDict:
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "function_call",
        "status": "in_progress",
        "name": name,
        "call_id": call_id,
        "arguments": "",
    }


# ---------------------------------------------------------------------------------------------
# input audio buffer


def speech_started(audio_start_ms: int, item_id: str) -> JsonDict:
    return _event("input_audio_buffer.speech_started", audio_start_ms=audio_start_ms, item_id=item_id)


def speech_stopped(audio_end_ms: int, item_id: str) -> JsonDict:
    return _event("input_audio_buffer.speech_stopped", audio_end_ms=audio_end_ms, item_id=item_id)


def buffer_committed(item_id: str, previous_item_id: str | None) -> JsonDict:
    return _event("input_audio_buffer.committed", item_id=item_id, previous_item_id=previous_item_id)


def buffer_cleared() -> JsonDict:
    return _event("input_audio_buffer.cleared")


def transcription_completed(item_id: str, transcript: str, audio_ms: int) -> JsonDict:
    audio_tokens = max(1, audio_ms // 100)
    text_tokens = max(1, len(transcript) // 4)
    return _event(
        "conversation.item.input_audio_transcription.completed",
        item_id=item_id,
        content_index=0,
        transcript=transcript,
        usage={
            "type": "tokens",
            "input_tokens": audio_tokens,
            "input_token_details": {"audio_tokens": audio_tokens, "text_tokens": 0},
            "output_tokens": text_tokens,
            "total_tokens": audio_tokens + text_tokens,
        },
    )


# ---------------------------------------------------------------------------------------------
# responses


def response_resource(
    response_id: str,
    *,
    status: str,
    output_modalities: list[str],
    voice: str | None,
    metadata: JsonDict | None,
    conversation_id: str | None,
    max_output_tokens: int | str,
    output: list[JsonDict] | None = None,
    status_details: JsonDict | None = None,
    usage: JsonDict | None = None,
) -> JsonDict:
    return {
        "object": "realtime.response",
        "id": response_id,
        "status": status,
        "status_details": status_details,
        "output": [public_item(i) for i in output or []],
        "conversation_id": conversation_id,
        "output_modalities": output_modalities,
        "max_output_tokens": max_output_tokens,
        "audio": {"output": {"format": {"type": "audio/pcm", "rate": SAMPLE_RATE}, "voice": voice}},
        "usage": usage,
        "metadata": metadata,
    }


def response_created(response: JsonDict) -> JsonDict:
    return _event("response.created", response=copy.deepcopy(response))


def response_done(response: JsonDict) -> JsonDict:
    return _event("response.done", response=copy.deepcopy(response))


def usage(
    *, input_text_tokens: int, input_audio_tokens: int, output_text_tokens: int, output_audio_tokens: int
) -> JsonDict:
    input_tokens = input_text_tokens + input_audio_tokens
    output_tokens = output_text_tokens + output_audio_tokens
    return {
        "total_tokens": input_tokens + output_tokens,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "input_token_details": {
            "text_tokens": input_text_tokens,
            "audio_tokens": input_audio_tokens,
            "image_tokens": 0,
            "cached_tokens": 0,
            "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0, "image_tokens": 0},
        },
        "output_token_details": {"text_tokens": output_text_tokens, "audio_tokens": output_audio_tokens},
    }


def output_item_added(response_id: str, output_index: int, item: JsonDict) -> JsonDict:
    return _event(
        "response.output_item.added", response_id=response_id, output_index=output_index, item=public_item(item)
    )


def output_item_done(response_id: str, output_index: int, item: JsonDict) -> JsonDict:
    return _event(
        "response.output_item.done", response_id=response_id, output_index=output_index, item=public_item(item)
    )


def _part_fields(response_id: str, item_id: str, output_index: int) -> JsonDict:
    return {"response_id": response_id, "item_id": item_id, "output_index": output_index, "content_index": 0}


def content_part_added(response_id: str, item_id: str, output_index: int, part: JsonDict) -> JsonDict:
    return _event("response.content_part.added", **_part_fields(response_id, item_id, output_index), part=part)


def content_part_done(response_id: str, item_id: str, output_index: int, part: JsonDict) -> JsonDict:
    return _event("response.content_part.done", **_part_fields(response_id, item_id, output_index), part=part)


def audio_delta(response_id: str, item_id: str, output_index: int, delta_b64: str) -> JsonDict:
    return _event("response.output_audio.delta", **_part_fields(response_id, item_id, output_index), delta=delta_b64)


def audio_done(response_id: str, item_id: str, output_index: int) -> JsonDict:
    return _event("response.output_audio.done", **_part_fields(response_id, item_id, output_index))


def audio_transcript_delta(response_id: str, item_id: str, output_index: int, delta: str) -> JsonDict:
    return _event(
        "response.output_audio_transcript.delta", **_part_fields(response_id, item_id, output_index), delta=delta
    )


def audio_transcript_done(response_id: str, item_id: str, output_index: int, transcript: str) -> JsonDict:
    return _event(
        "response.output_audio_transcript.done",
        **_part_fields(response_id, item_id, output_index),
        transcript=transcript,
    )


def text_delta(response_id: str, item_id: str, output_index: int, delta: str) -> JsonDict:
    return _event("response.output_text.delta", **_part_fields(response_id, item_id, output_index), delta=delta)


def text_done(response_id: str, item_id: str, output_index: int, text: str) -> JsonDict:
    return _event("response.output_text.done", **_part_fields(response_id, item_id, output_index), text=text)


def function_call_arguments_delta(
    response_id: str, item_id: str, output_index: int, call_id: str, delta: str
) -> JsonDict:
    return _event(
        "response.function_call_arguments.delta",
        response_id=response_id,
        item_id=item_id,
        output_index=output_index,
        call_id=call_id,
        delta=delta,
    )


def function_call_arguments_done(
    response_id: str, item_id: str, output_index: int, call_id: str, name: str, arguments: str
) -> JsonDict:
    return _event(
        "response.function_call_arguments.done",
        response_id=response_id,
        item_id=item_id,
        output_index=output_index,
        call_id=call_id,
        name=name,
        arguments=arguments,
    )


# ---------------------------------------------------------------------------------------------
# introspection


def summarize_client_event(event: JsonDict) -> JsonDict:
    """A text-free summary of a client event, for logs and the control API.

    Conversation text, instructions, tool arguments/outputs and audio never appear here: the
    summary keeps only the event type and the ids a test needs to correlate events.
    """
    summary: JsonDict = {"type": event.get("type")}
    for key in ("event_id", "item_id", "previous_item_id", "response_id", "content_index", "audio_end_ms"):
        if key in event:
            summary[key] = event[key]
    item = event.get("item")
    if isinstance(item, dict):
        for src, dst in (("id", "item_id"), ("type", "item_type"), ("role", "role"), ("call_id", "call_id")):
            if item.get(src) is not None:
                summary[dst] = item[src]
        if item.get("type") == "function_call" and item.get("name"):
            summary["name"] = item["name"]
    response = event.get("response")
    if isinstance(response, dict):
        metadata = response.get("metadata")
        if isinstance(metadata, dict) and "client_event_id" in metadata:
            summary["client_event_id"] = metadata["client_event_id"]
    session = event.get("session")
    if isinstance(session, dict):
        summary["session_keys"] = sorted(session.keys())
        if isinstance(session.get("tools"), list):
            summary["tool_names"] = [t.get("name") for t in session["tools"] if isinstance(t, dict)]
    return summary
