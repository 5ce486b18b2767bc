"""The ``conversation.item.*`` client events: create, delete, retrieve and truncate.

Each handler validates the request the way the real API does and answers either with the
matching server event or with an ``error`` naming the client event (codes and messages copied
from the real service, since the plugin and tests match on them).
"""

from __future__ import annotations

from typing import TypeGuard

from . import protocol as p
from .connection_state import ConnectionState
from .conversation import DuplicateItemError, ItemNotFoundError
from .protocol import JsonDict

_ITEM_TYPES = ("message", "function_call", "function_call_output")
_REQUIRED_FIELDS = {
    "message": ("role", "content"),
    "function_call": ("call_id", "name", "arguments"),
    "function_call_output": ("call_id", "output"),
}


class ConversationItemHandlers(ConnectionState):
    def _on_item_create(self, event: JsonDict) -> None:
        item = event.get("item")
        if not self._item_is_valid(item, event):
            return
        stored = {**item, "id": item.get("id") or p.new_id("item_"), "object": "realtime.item", "status": "completed"}
        try:
            previous = self.conversation.insert(stored, event.get("previous_item_id"))
        except (DuplicateItemError, ItemNotFoundError) as e:
            self._refuse_insert(event, stored, e)
            return
        self.emit(p.conversation_item_added(stored, previous))
        self.emit(p.conversation_item_done(stored, previous))

    def _item_is_valid(self, item: object, event: JsonDict) -> TypeGuard[JsonDict]:
        """Check the item's type and required fields, answering with an error when it is not valid."""
        if not isinstance(item, dict) or item.get("type") not in _ITEM_TYPES:
            self._reject(
                event,
                "Invalid 'item': expected a message, function_call or function_call_output item.",
                code="invalid_value",
                param="item",
            )
            return False
        for key in _REQUIRED_FIELDS[item["type"]]:
            if item.get(key) is None:
                self._missing(event, f"item.{key}")
                return False
        return True

    def _refuse_insert(self, event: JsonDict, stored: JsonDict, e: DuplicateItemError | ItemNotFoundError) -> None:
        if isinstance(e, DuplicateItemError):
            self._reject(
                event,
                f"Item with item_id '{stored['id']}' already exists.",
                code="item_create_duplicate_item_id",
                param="item.id",
            )
            return
        self._reject(
            event,
            f"Error adding item: the previous item with id '{event.get('previous_item_id')}' does not exist.",
            code="item_create_invalid_previous_item_id",
            param="previous_item_id",
        )

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
        refusal = self._truncate_refusal(item_id, item, audio_end_ms)
        if refusal is not None:
            message, code, param = refusal
            self.emit(p.error(message, code=code, client_event_id=event.get("event_id"), param=param))
            return
        assert item is not None
        self._audio_ms_by_item[item_id] = audio_end_ms
        # the real API drops the transcript so the context holds nothing the user did not hear
        for part in item.get("content") or []:
            if isinstance(part, dict) and part.get("type") == "output_audio":
                part["transcript"] = ""
        self.emit(p.conversation_item_truncated(item_id, content_index, audio_end_ms))

    def _truncate_refusal(self, item_id: str, item: JsonDict | None, audio_end_ms: int) -> tuple[str, str, str] | None:
        """Why this truncation is refused, as (message, code, param); None when it may proceed."""
        if item is None:
            return (
                f"Error truncating item: the item with id '{item_id}' does not exist.",
                "item_truncate_invalid_item_id",
                "item_id",
            )
        if item.get("role") != "assistant" or item_id not in self._audio_ms_by_item:
            return "Only model output audio messages can be truncated", "unsupported_content_type", "item_id"
        available = self._audio_ms_by_item[item_id]
        if audio_end_ms > available:
            return (
                f"Audio content of {available}ms is already shorter than {audio_end_ms}ms",
                "invalid_value",
                "audio_end_ms",
            )
        return None
