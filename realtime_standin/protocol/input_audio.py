"""The ``input_audio_buffer.*`` events and the input transcription of a committed user turn.

These are the events of one user audio turn, in the order a turn produces them: speech started,
speech stopped, buffer committed, and (when the session transcribes) the transcription.
"""

from __future__ import annotations

from .wire import JsonDict, server_event


def speech_started(audio_start_ms: int, item_id: str) -> JsonDict:
    return server_event("input_audio_buffer.speech_started", audio_start_ms=audio_start_ms, item_id=item_id)


def speech_stopped(audio_end_ms: int, item_id: str) -> JsonDict:
    return server_event("input_audio_buffer.speech_stopped", audio_end_ms=audio_end_ms, item_id=item_id)


def buffer_committed(item_id: str, previous_item_id: str | None) -> JsonDict:
    return server_event("input_audio_buffer.committed", item_id=item_id, previous_item_id=previous_item_id)


def buffer_cleared() -> JsonDict:
    return server_event("input_audio_buffer.cleared")


def transcription_completed(item_id: str, transcript: str, audio_ms: int) -> JsonDict:
    audio_tokens = max(1, audio_ms // 100)
    text_tokens = max(1, len(transcript) // 4)
    return server_event(
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
