"""The ``error`` server event, the one way the stand-in refuses a client event.

Its ``error.event_id`` carries the id of the client event it answers, which is how a client
(and the livekit plugin) matches a refusal to its request.
"""

from __future__ import annotations

from .wire import JsonDict, server_event


def error(
    message: str,
    *,
    code: str | None,
    client_event_id: str | None = None,
    param: str | None = None,
    error_type: str = "invalid_request_error",
) -> JsonDict:
    """An ``error`` server event; ``client_event_id`` lets the client match it to its request."""
    return server_event(
        "error",
        error={"type": error_type, "code": code, "message": message, "param": param, "event_id": client_event_id},
    )
