"""Ledger text made safe for a terminal or a JSON reader, and the human-readable listing of a room.

Why escaping: the ledger holds text that came from outside (titles, citations and excerpts from a search
service, a caller's redacted question). Printed raw, a control or bidirectional-override character could
rewrite the operator's terminal or make a line read differently from what is stored, so every such
character is shown as a visible `\\uXXXX` escape, in the text and in the JSON output alike.
"""

from __future__ import annotations

import unicodedata
from typing import Any

__all__ = ["escape_untrusted", "format_room", "json_escape"]

# Cc: C0/C1 controls and DEL; Cf: format characters, which include the bidi overrides and isolates
# (U+202A-202E, U+2066-2069), the marks U+200E/200F and zero-width characters; Zl/Zp: line and paragraph
# separators; Cs/Co/Cn: surrogates, private use and unassigned code points.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in _UNSAFE_CATEGORIES


def escape_untrusted(text: str) -> str:
    """`text` with every control, format (bidi) and separator character written as a visible escape."""
    if not any(_unsafe(ch) for ch in text):
        return text
    out: list[str] = []
    for ch in text:
        if not _unsafe(ch):
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def json_escape(text: str) -> str:
    """JSON text with the same characters as `\\uXXXX` JSON escapes (so it still parses to the stored text)."""
    out: list[str] = []
    for ch in text:
        if not _unsafe(ch) or ch == "\n":
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:  # a JSON escape of a non-BMP character is its UTF-16 surrogate pair
            high, low = divmod(ord(ch) - 0x10000, 0x400)
            out.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}")
    return "".join(out)


def _server(call: dict[str, Any]) -> str:
    e = escape_untrusted
    if not call.get("server_name"):
        return "server unknown"
    text = f"server {e(call['server_name'])} {e(call.get('server_version') or '?')}"
    if call.get("index_version"):
        text += f", index {e(call['index_version'])}"
    return text


def _norm(key: str | None) -> str:
    if key is None:
        return "no norm named"
    return "the Constitution" if key == "constitucion" else key


def format_room(
    room: str,
    calls: list[dict[str, Any]],
    erasures: list[dict[str, Any]],
    citations: list[dict[str, Any]] | None = None,
) -> str:
    """What the room's user was shown, call by call, then the citations the agent spoke that no source held;
    every value read from the store is escaped."""
    e = escape_untrusted
    lines: list[str] = []
    if calls:
        lines.append(f"Room {e(room)}: {len(calls)} tool call(s)")
    else:
        lines.append(f"No tool calls recorded for room {e(repr(room))}.")
    for n, c in enumerate(calls, start=1):
        reason = f" ({e(c['reason'])})" if c["reason"] else ""
        lines.append(
            f"{n}. {e(c['ts'])}  session {e(c['session_id'])}  turn {c['turn']}  call {e(c['call_id'])}  {e(c['tool'])}"
        )
        lines.append(f"   question: {e(c['query_redacted'])}  [digest {e(c['query_digest'])}]")
        lines.append(f"   outcome: {e(c['outcome'])}{reason} in {c['duration_ms']:.0f} ms  ({_server(c)})")
        for s in c["sources"]:
            url = e(s["official_source_url"]) if s["official_source_url"] else "(no official URL)"
            title = f"{e(s['title'])} — " if s.get("title") else ""
            lines.append(f"   [{s['position']}] {title}{e(s['citation'])} — {url}")
            if s.get("excerpt") is not None:
                lines.append(f"       «{e(s['excerpt'])}»")
            else:
                lines.append("       (excerpt text not kept: recorded before the ledger kept excerpts)")
            lines.append(f"       excerpt sha256 {e(s['excerpt_sha256'])}")
    if citations:
        lines.append(f"Unverified citations: {len(citations)} (the agent named them; no source it was given held them)")
    for c in citations or []:
        lines.append(
            f"- {e(c['ts'])}  session {e(c['session_id'])}  turn {c['turn']}  artículo {e(c['article'])}"
            f" ({e(_norm(c['norm']))})"
        )
    for ev in erasures:
        cited = f" and {ev['citations_removed']} unverified citation(s)" if ev.get("citations_removed") else ""
        lines.append(f"Forgotten at {e(ev['ts'])}: {ev['calls_removed']} tool call(s){cited} erased on request.")
    return "\n".join(lines) + "\n"
