"""The session resource: the defaults a connection starts with and how ``session.update`` applies.

The merge rules are the subtle part of the session protocol (nested objects merge, some settings
are replaced wholesale, ``turn_detection`` is completed with the defaults of its type), so they
live apart from the plain event builders.
"""

from __future__ import annotations

import copy
import time

from .wire import SAMPLE_RATE, JsonDict, new_id, server_event


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
    return server_event("session.created", session=copy.deepcopy(session))


def session_updated(session: JsonDict) -> JsonDict:
    return server_event("session.updated", session=copy.deepcopy(session))
