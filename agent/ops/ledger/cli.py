"""`python -m agent ledger ...`: show a room, export a period, purge by retention, forget a room, migrate.

Why a CLI in the product: the questions an auditor or an operator asks of the ledger ("what did the user
in room R see?", "everything from 3 March", "erase what is older than our retention", "erase this room")
must be answerable without writing SQL against a store they may not know, and every answer goes through
the same escaping. The store is `--url` (or `--path`), else `LEXVOZ_LEDGER_URL` / `LEXVOZ_LEDGER_PATH`.

On PostgreSQL, `migrate`, `purge` and `forget` are the owner's commands (they change the schema or delete
under the erasure gate); `migrate` also sets up the application role the workers use (`roles`). `show` and
`export` work under either role.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from sqlalchemy.exc import SQLAlchemyError

from agent.ops.ledger.erase import forget_room, purge_older_than
from agent.ops.ledger.reader import read_citations_range, read_range, read_room, read_room_citations, room_erasures
from agent.ops.ledger.render import escape_untrusted, format_room, json_escape
from agent.ops.ledger.roles import LedgerRoleError, grant_app_role, valid_role_name
from agent.ops.ledger.schema import LedgerSchemaError
from agent.ops.ledger.store import LedgerLocationError, LedgerStore, describe_location

__all__ = ["ledger_main", "parse_bound"]


class _Usage(Exception):
    """A bad argument or setting: printed as one line, exit 2."""


def parse_bound(value: str, *, end: bool) -> datetime:
    """A date (`2025-03-03`) or an ISO time; naive times are UTC. A date as the end includes that whole day."""
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            start = datetime(day.year, day.month, day.day, tzinfo=UTC)
            return start + timedelta(days=1) if end else start
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _Usage(f"not a date or ISO time: {value!r} (use 2025-03-03 or 2025-03-03T14:00:00Z)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agent ledger", description="Read and maintain the evidence ledger."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def with_store(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        group = p.add_mutually_exclusive_group()
        group.add_argument("--url", default=None, help="ledger store: a SQLite path or postgresql://... URL")
        group.add_argument("--path", type=Path, default=None, help="SQLite ledger file (same as --url PATH)")
        return p

    show = with_store(
        sub.add_parser("show", help="what the user in a room was shown, call by call, and the unverified citations")
    )
    show.add_argument("--room", required=True)
    show.add_argument("--json", action="store_true", help="machine-readable output")
    export = with_store(sub.add_parser("export", help="every tool call in a period, one JSON object a line"))
    export.add_argument(
        "--citations", action="store_true", help="the unverified citations of the period instead of the tool calls"
    )
    export.add_argument("--since", required=True, help="first day or time included (UTC)")
    export.add_argument("--until", required=True, help="last day included, or a time excluded (UTC)")
    export.add_argument("--output", type=Path, default=None, help="file to write (owner-only); default stdout")
    purge = with_store(sub.add_parser("purge", help="erase what is older than the retention, and record it"))
    purge.add_argument("--older-than-days", type=int, default=None, help="default: LEXVOZ_LEDGER_RETENTION_DAYS")
    forget = with_store(sub.add_parser("forget", help="erase one room's entries, and record that it was done"))
    forget.add_argument("--room", required=True)
    migrate = with_store(sub.add_parser("migrate", help="bring the store to this program's schema (as the owner)"))
    migrate.add_argument(
        "--app-role",
        default=None,
        help="PostgreSQL role for workers and the page service, created and granted read/insert only"
        " (default: LEXVOZ_LEDGER_APP_ROLE; its password: LEXVOZ_LEDGER_APP_PASSWORD)",
    )
    return parser


def _settings() -> Any:
    from agent.settings import SettingsError, get_settings

    try:
        return get_settings()
    except SettingsError as exc:
        raise _Usage(str(exc)) from None


def _location(args: argparse.Namespace) -> str | Path:
    if args.url:
        return str(args.url)
    if args.path is not None:
        return Path(args.path)
    return _settings().ledger_location  # type: ignore[no-any-return]


def _show(args: argparse.Namespace, location: str | Path, out: IO[str]) -> None:
    calls = read_room(location, args.room)
    erasures = room_erasures(location, args.room)
    citations = read_room_citations(location, args.room)
    if args.json:
        body = {"room": args.room, "calls": calls, "unverified_citations": citations, "forgotten": erasures}
        out.write(json_escape(json.dumps(body, ensure_ascii=False, indent=2)) + "\n")
    else:
        out.write(format_room(args.room, calls, erasures, citations))


@contextlib.contextmanager
def _output(path: Path | None) -> Iterator[IO[str]]:
    """Stdout, or a new owner-only file that takes `path`'s name only once the export is complete.

    The export holds what people asked, so it is written to a fresh 0600 file beside `path` (`mkstemp`:
    created exclusively, never through an existing name) and renamed over `path` at the end. Whatever
    was at `path` is replaced, never written through: an existing 0644 file gives way to the new 0600
    one, and a symbolic link is itself replaced, its target left untouched. A failed export leaves
    `path` as it was.
    """
    if path is None:
        yield sys.stdout
        return
    target = Path(path)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with open(fd, "w", encoding="utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _export(args: argparse.Namespace, location: str | Path) -> None:
    since, until = parse_bound(args.since, end=False), parse_bound(args.until, end=True)
    if since >= until:
        raise _Usage("--since must be before --until")
    count = 0
    rows = read_citations_range(location, since, until) if args.citations else read_range(location, since, until)
    with _output(args.output) as out:
        for row in rows:
            out.write(json_escape(json.dumps(row, ensure_ascii=False)) + "\n")
            count += 1
    what = "unverified citation(s)" if args.citations else "tool call(s)"
    print(f"ledger: exported {count} {what}", file=sys.stderr)


def _purge(args: argparse.Namespace, location: str | Path) -> None:
    days = args.older_than_days
    if days is None:
        days = _settings().ledger_retention_days
        if days is None:
            raise _Usage("no retention: set LEXVOZ_LEDGER_RETENTION_DAYS or pass --older-than-days N")
    if days < 1:
        raise _Usage("--older-than-days must be at least 1")
    with LedgerStore.open(location) as store:
        done = purge_older_than(store, days)
    print(
        f"ledger: purged {done.calls_removed} tool call(s), {done.sources_removed} source(s) and"
        f" {done.citations_removed} unverified citation(s) before {done.cutoff}"
    )


def _forget(args: argparse.Namespace, location: str | Path) -> None:
    with LedgerStore.open(location) as store:
        done = forget_room(store, args.room)
    room = escape_untrusted(args.room)
    print(
        f"ledger: forgot room {room}: {done.calls_removed} tool call(s), {done.sources_removed} source(s),"
        f" {done.citations_removed} unverified citation(s)"
    )


def _migrate(args: argparse.Namespace, location: str | Path) -> None:
    settings = _settings()
    role = args.app_role or settings.ledger_app_role
    secret = settings.ledger_app_password  # from the environment only: never on a command line
    password = secret.get_secret_value() if secret is not None else None
    if role is not None:
        valid_role_name(role)
    with LedgerStore.open(location, readonly=False) as store:
        print(f"ledger: schema version {store.version()} at {escape_untrusted(describe_location(location))}")
        if role is not None:
            created = grant_app_role(store, role, password)
            state = "created" if created else "updated"
            print(f"ledger: role {role} {state}: may read and insert evidence, and spend resume tokens")


def ledger_main(argv: list[str]) -> int:
    """Entry for `python -m agent ledger`; `argv` is what follows `ledger`. 0 ok, 1 store problem, 2 usage."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    location: str | Path = "?"
    try:
        location = _location(args)
        if args.command == "show":
            _show(args, location, sys.stdout)
        elif args.command == "export":
            _export(args, location)
        elif args.command == "purge":
            _purge(args, location)
        elif args.command == "forget":
            _forget(args, location)
        else:
            _migrate(args, location)
    except (_Usage, LedgerLocationError, LedgerRoleError) as exc:
        print(f"ledger: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError:
        print(f"ledger: no ledger file at {escape_untrusted(describe_location(location))}", file=sys.stderr)
        return 1
    except LedgerSchemaError as exc:
        print(f"ledger: {exc}", file=sys.stderr)
        return 1
    except (SQLAlchemyError, OSError) as exc:
        where = escape_untrusted(describe_location(location))
        print(f"ledger: cannot use {where}: {type(exc).__name__}", file=sys.stderr)
        return 1
    return 0
