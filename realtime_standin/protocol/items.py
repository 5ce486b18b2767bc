"""Conversation items: the item resources the server creates and the ``conversation.item.*`` events.

An item is reported the way the server shows it (:func:`public_item`): input audio bytes are
never echoed back, whichever event carries the item.
"""

from __future__ import annotations

import copy

from .wire import JsonDict, server_event


def conversation_item_added(item: JsonDict, previous_item_id: str | None) -> JsonDict:
    return server_event("conversation.item.added", previous_item_id=previous_item_id, item=public_item(item))


def conversation_item_done(item: JsonDict, previous_item_id: str | None) -> JsonDict:
    return server_event("conversation.item.done", previous_item_id=previous_item_id, item=public_item(item))


def conversation_item_deleted(item_id: str) -> JsonDict:
    return server_event("conversation.item.deleted", item_id=item_id)


def conversation_item_truncated(item_id: str, content_index: int, audio_end_ms: int) -> JsonDict:
    return server_event(
        "conversation.item.truncated", item_id=item_id, content_index=content_index, audio_end_ms=audio_end_ms
    )


def conversation_item_retrieved(item: JsonDict) -> JsonDict:
    return server_event("conversation.item.retrieved", item=public_item(item))


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
