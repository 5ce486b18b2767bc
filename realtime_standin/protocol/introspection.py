"""Text-free summaries of client events, for logs and the control API.

The stand-in promises that conversation text never leaves it except on the Realtime socket;
this is the one place that decides which fields of a client event are safe to show.
"""

from __future__ import annotations

from .wire import JsonDict


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
