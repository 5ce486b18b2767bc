"""One Realtime connection: parse each client event, route it to its handler, update the session.

Client events are handled one at a time, in arrival order, by :meth:`RealtimeConnection.handle`;
server events go out through a single ordered queue (``emit`` is synchronous), so the order
in which the handlers call ``emit`` is exactly the order on the wire. The handlers live with the
part of the protocol they serve (:mod:`.conversation_items`, :mod:`.input_audio`,
:mod:`.responses`, all on :mod:`.connection_state`); this module assembles them and owns the
dispatch and ``session.update``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from . import protocol as p
from .conversation_items import ConversationItemHandlers
from .input_audio import InputAudioHandlers
from .options import ConnectionOptions
from .protocol import JsonDict

__all__ = ["ConnectionOptions", "RealtimeConnection"]

logger = logging.getLogger("realtime_standin")


class RealtimeConnection(ConversationItemHandlers, InputAudioHandlers):
    """Session config, conversation, input audio and responses of one WebSocket client."""

    def handle(self, raw: str | JsonDict) -> None:
        event = self._parse(raw)
        if event is None:
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

    def _parse(self, raw: str | JsonDict) -> JsonDict | None:
        """The client event as a dict with a ``type``, or None after answering with an error."""
        if isinstance(raw, str):
            try:
                event = json.loads(raw)
            except ValueError:
                self.emit(p.error("The server could not parse the JSON payload.", code="invalid_json"))
                return None
        else:
            event = raw
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            self.emit(p.error("Missing required parameter: 'type'.", code="missing_required_parameter", param="type"))
            return None
        return event

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
