"""Builders for OpenAI Realtime (GA) server events, ids and error payloads.

Keeping every wire shape in this package makes it easy to compare the stand-in with the
published protocol: one function per server event, named after the event type. The shapes
follow the GA schema (``output_audio``/``output_text`` event names, nested ``audio`` session
config, ``conversation.item.added``/``done``), which is what livekit-agents' OpenAI plugin
parses. Nothing here does I/O.

The modules follow the protocol's own grouping (session, errors, items, input audio, responses);
this package re-exports all of them so the connection code reads ``p.<event_name>(...)``.
"""

from .errors import error
from .input_audio import buffer_cleared, buffer_committed, speech_started, speech_stopped, transcription_completed
from .introspection import summarize_client_event
from .items import (
    assistant_message_item,
    conversation_item_added,
    conversation_item_deleted,
    conversation_item_done,
    conversation_item_retrieved,
    conversation_item_truncated,
    function_call_item,
    public_item,
    user_audio_item,
)
from .responses import (
    audio_delta,
    audio_done,
    audio_transcript_delta,
    audio_transcript_done,
    content_part_added,
    content_part_done,
    function_call_arguments_delta,
    function_call_arguments_done,
    output_item_added,
    output_item_done,
    response_created,
    response_done,
    response_resource,
    text_delta,
    text_done,
    usage,
)
from .session_config import default_session, default_turn_detection, merge_session, session_created, session_updated
from .wire import BYTES_PER_MS, SAMPLE_RATE, JsonDict, new_call_id, new_id

__all__ = [
    "BYTES_PER_MS",
    "SAMPLE_RATE",
    "JsonDict",
    "assistant_message_item",
    "audio_delta",
    "audio_done",
    "audio_transcript_delta",
    "audio_transcript_done",
    "buffer_cleared",
    "buffer_committed",
    "content_part_added",
    "content_part_done",
    "conversation_item_added",
    "conversation_item_deleted",
    "conversation_item_done",
    "conversation_item_retrieved",
    "conversation_item_truncated",
    "default_session",
    "default_turn_detection",
    "error",
    "function_call_arguments_delta",
    "function_call_arguments_done",
    "function_call_item",
    "merge_session",
    "new_call_id",
    "new_id",
    "output_item_added",
    "output_item_done",
    "public_item",
    "response_created",
    "response_done",
    "response_resource",
    "session_created",
    "session_updated",
    "speech_started",
    "speech_stopped",
    "summarize_client_event",
    "text_delta",
    "text_done",
    "transcription_completed",
    "usage",
    "user_audio_item",
]
