"""Responses: the response resource, its usage block and every ``response.*`` event.

The GA event names live here (``response.output_audio.delta``, ``response.output_text.delta``,
``response.output_audio_transcript.*``), which are the ones livekit-agents' OpenAI plugin parses.
"""

from __future__ import annotations

import copy

from .items import public_item
from .wire import SAMPLE_RATE, JsonDict, server_event


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
    return server_event("response.created", response=copy.deepcopy(response))


def response_done(response: JsonDict) -> JsonDict:
    return server_event("response.done", response=copy.deepcopy(response))


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
    return server_event(
        "response.output_item.added", response_id=response_id, output_index=output_index, item=public_item(item)
    )


def output_item_done(response_id: str, output_index: int, item: JsonDict) -> JsonDict:
    return server_event(
        "response.output_item.done", response_id=response_id, output_index=output_index, item=public_item(item)
    )


def _part_fields(response_id: str, item_id: str, output_index: int) -> JsonDict:
    return {"response_id": response_id, "item_id": item_id, "output_index": output_index, "content_index": 0}


def content_part_added(response_id: str, item_id: str, output_index: int, part: JsonDict) -> JsonDict:
    return server_event("response.content_part.added", **_part_fields(response_id, item_id, output_index), part=part)


def content_part_done(response_id: str, item_id: str, output_index: int, part: JsonDict) -> JsonDict:
    return server_event("response.content_part.done", **_part_fields(response_id, item_id, output_index), part=part)


def audio_delta(response_id: str, item_id: str, output_index: int, delta_b64: str) -> JsonDict:
    return server_event(
        "response.output_audio.delta", **_part_fields(response_id, item_id, output_index), delta=delta_b64
    )


def audio_done(response_id: str, item_id: str, output_index: int) -> JsonDict:
    return server_event("response.output_audio.done", **_part_fields(response_id, item_id, output_index))


def audio_transcript_delta(response_id: str, item_id: str, output_index: int, delta: str) -> JsonDict:
    return server_event(
        "response.output_audio_transcript.delta", **_part_fields(response_id, item_id, output_index), delta=delta
    )


def audio_transcript_done(response_id: str, item_id: str, output_index: int, transcript: str) -> JsonDict:
    return server_event(
        "response.output_audio_transcript.done",
        **_part_fields(response_id, item_id, output_index),
        transcript=transcript,
    )


def text_delta(response_id: str, item_id: str, output_index: int, delta: str) -> JsonDict:
    return server_event("response.output_text.delta", **_part_fields(response_id, item_id, output_index), delta=delta)


def text_done(response_id: str, item_id: str, output_index: int, text: str) -> JsonDict:
    return server_event("response.output_text.done", **_part_fields(response_id, item_id, output_index), text=text)


def function_call_arguments_delta(
    response_id: str, item_id: str, output_index: int, call_id: str, delta: str
) -> JsonDict:
    return server_event(
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
    return server_event(
        "response.function_call_arguments.done",
        response_id=response_id,
        item_id=item_id,
        output_index=output_index,
        call_id=call_id,
        name=name,
        arguments=arguments,
    )
