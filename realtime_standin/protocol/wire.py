"""What every server event shares: the audio format, id shapes and the event envelope.

The other protocol modules build their events on :func:`server_event`, so the ``type`` +
``event_id`` envelope and the id formats the client checks are defined exactly once.
"""

from __future__ import annotations

import secrets
import string
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


def server_event(event_type: str, **fields: Any) -> JsonDict:
    return {"type": event_type, "event_id": new_id("event_"), **fields}
