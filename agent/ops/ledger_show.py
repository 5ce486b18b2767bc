"""`python -m agent ledger show`: read one room's tool calls from the evidence ledger, safely for a terminal.

Why escaping: the ledger holds text that came from outside (citations from a search service, a caller's
redacted question). Printed raw, a control or bidirectional-override character could rewrite the
operator's terminal or make a line read differently from what is stored, so every such character is
shown as a visible `\\uXXXX` escape, in the text and in the JSON output alike.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import unicodedata
from pathlib import Path
from typing import Any

__all__ = ["escape_untrusted", "ledger_main", "read_room"]

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


def _json_escape(text: str) -> str:
    """JSON output with the same characters as `\\uXXXX` JSON escapes (so it still parses to the stored text)."""
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


def read_room(path: str | Path, room: str) -> list[dict[str, Any]]:
    """Every tool call of `room` in the order it was recorded, each with its sources."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(str(p))
    conn = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        calls = [
            dict(r)
            for r in conn.execute(
                "SELECT id, ts, room, session_id, turn, call_id, tool, query_redacted, query_digest,"
                " outcome, duration_ms, reason FROM tool_calls WHERE room = ? ORDER BY id",
                (room,),
            )
        ]
        for call in calls:
            call["sources"] = [
                dict(r)
                for r in conn.execute(
                    "SELECT position, citation, official_source_url, excerpt_sha256 FROM sources"
                    " WHERE call_row = ? ORDER BY position",
                    (call.pop("id"),),
                )
            ]
    finally:
        conn.close()
    return calls


def _format_text(room: str, calls: list[dict[str, Any]]) -> str:
    """The human-readable listing; every value read from the file goes through `escape_untrusted`."""
    if not calls:
        return f"No tool calls recorded for room {escape_untrusted(repr(room))}.\n"
    e = escape_untrusted
    lines = [f"Room {e(room)}: {len(calls)} tool call(s)"]
    for n, c in enumerate(calls, start=1):
        reason = f" ({e(c['reason'])})" if c["reason"] else ""
        lines.append(
            f"{n}. {e(c['ts'])}  session {e(c['session_id'])}  turn {c['turn']}  call {e(c['call_id'])}  {e(c['tool'])}"
        )
        lines.append(f"   question: {e(c['query_redacted'])}  [digest {e(c['query_digest'])}]")
        lines.append(f"   outcome: {e(c['outcome'])}{reason} in {c['duration_ms']:.0f} ms")
        for s in c["sources"]:
            url = e(s["official_source_url"]) if s["official_source_url"] else "(no official URL)"
            lines.append(f"   [{s['position']}] {e(s['citation'])} — {url} — excerpt sha256 {e(s['excerpt_sha256'])}")
    return "\n".join(lines) + "\n"


def ledger_main(argv: list[str]) -> int:
    """`python -m agent ledger show --room ROOM [--json] [--path P]`; `argv` is what follows `ledger`."""
    parser = argparse.ArgumentParser(prog="python -m agent ledger", description="Read the evidence ledger.")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="what was researched in a room, and which sources were shown")
    show.add_argument("--room", required=True)
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.add_argument("--path", type=Path, default=None, help="ledger file (default: LEXVOZ_LEDGER_PATH)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    path: Path = args.path
    if path is None:
        from agent.settings import get_settings

        path = get_settings().ledger_path
    try:
        calls = read_room(path, args.room)
    except FileNotFoundError:
        print(f"ledger: no ledger file at {escape_untrusted(str(path))}", file=sys.stderr)
        return 1
    except sqlite3.Error as exc:
        print(f"ledger: cannot read {escape_untrusted(str(path))}: {type(exc).__name__}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(
            _json_escape(json.dumps({"room": args.room, "calls": calls}, ensure_ascii=False, indent=2)) + "\n"
        )
    else:
        sys.stdout.write(_format_text(args.room, calls))
    return 0
