"""Waits and checks for the two-node suite that, when they fail, say where: the step, the room and the worker.

A cluster failure read from a bare `TimeoutError` ("no agent within 60 s") leaves the reader to find out
which of two workers had the room and what it was doing; on a shared two-core host that costs a rerun,
and the failure that shows once in ten runs may not show again. So every wait and check of the suite
goes through a `Witness`, whose failure (`StepFailed`) names the step, the room, the worker that held
the room (or should have: the survivor, after the other was stopped) and ends with the tail of that
worker's log. The workers' logs carry no conversation content (the agent logs digests, not what people
say), so the tail can be printed as it is.

`StepFailed.where` is also what the suite's conftest writes to `failures.jsonl` beside the logs, so a
script that runs the suite many times can count failures by step without parsing pytest's output.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

TAIL_LINES = 30
ROOM_LINES = 15
LINE_CHARS = 300
POLL_S = 0.2


@dataclass(frozen=True)
class Where:
    """Where a failure happened: what the test was doing, in which room, and which worker held that room.

    `worker` is a worker's name, or "" when no worker had received the room's job (then the failure
    shows every worker's log)."""

    step: str
    room: str
    worker: str

    def describe(self) -> str:
        held = self.worker or "none (no worker received its job)"
        return f"room {self.room or '(none)'}: {self.step} [worker: {held}]"

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


class StepFailed(AssertionError):
    """A wait or check of the cluster suite that did not hold; the message names the step, room and worker."""

    def __init__(self, where: Where, detail: str, tails: str) -> None:
        super().__init__(f"{where.describe()}: {detail}\n{tails}")
        self.where = where
        self.detail = detail


def failure_record(test: str, when: str, error: BaseException) -> dict[str, str]:
    """One line of `failures.jsonl`: where a failed test failed; an error outside the named steps says so."""
    if isinstance(error, StepFailed):
        where, detail = error.where, error.detail
    else:
        where = Where(step=f"{when}: outside the suite's named steps", room="", worker="")
        first = str(error).splitlines()[0] if str(error) else ""
        detail = f"{type(error).__name__}: {first}"
    return {"test": test, "when": when, **asdict(where), "detail": detail[:500]}


def brief(line: str) -> str:
    """One log line, short: a JSON record as time, level, room, job, logger and message; else as written.

    The worker's records carry code paths and, for a blocked event loop, a whole stack; a failure needs what
    happened and to which room."""
    try:
        record = json.loads(line)
    except ValueError:
        return line[:LINE_CHARS]
    if not isinstance(record, dict):
        return line[:LINE_CHARS]
    fields = [str(record[k]) for k in ("timestamp", "level") if k in record]
    fields += [f"{k}={record[k]}" for k in ("room", "job_id") if k in record]
    fields += [f"{record['name']}:"] if "name" in record else []
    return " ".join([*fields, str(record.get("message", ""))])[:LINE_CHARS]


def log_tail(path: Path, lines: int = TAIL_LINES, *, about: str = "") -> str:
    """The last `lines` lines of a log (only those naming `about`, when given), shortened; or why there are none."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log at {path.name}: {exc.strerror})"
    chosen = [line for line in text.splitlines() if about in line] if about else text.splitlines()
    return "\n".join(brief(line) for line in chosen[-lines:]) or "(none)"


class Witness:
    """Runs the suite's waits and checks; knows each worker's log and which worker took which room.

    `logs` maps a worker's name to its log; `held_by(room)` names the worker whose log has the room's job
    (or None). A step that knows which worker *should* hold the room (the survivor) passes `worker=`."""

    def __init__(self, logs: Mapping[str, Path], held_by: Callable[[str], str | None]) -> None:
        self._logs = dict(logs)
        self._held_by = held_by

    def where(self, step: str, room: str, worker: str | None = None) -> Where:
        return Where(step=step, room=room, worker=worker or (self._held_by(room) if room else None) or "")

    def failure(self, step: str, room: str, detail: str, *, worker: str | None = None) -> StepFailed:
        where = self.where(step, room, worker)
        names = [where.worker] if where.worker in self._logs else sorted(self._logs)
        parts = []
        for name in names:
            if room:
                parts.append(f"--- {name}'s log, its last {ROOM_LINES} lines about {room} ---")
                parts.append(log_tail(self._logs[name], ROOM_LINES, about=room))
            parts.append(f"--- {name}'s log, its last {TAIL_LINES} lines ---")
            parts.append(log_tail(self._logs[name]))
        return StepFailed(where, detail, "\n".join(parts))

    def check(self, holds: object, step: str, room: str, detail: str, *, worker: str | None = None) -> None:
        """Fail with where it happened unless `holds` is truthy (a check, not a wait)."""
        if not holds:
            raise self.failure(step, room, detail, worker=worker)

    async def wait(
        self, awaitable: Awaitable[T], step: str, room: str, within: float, *, worker: str | None = None
    ) -> T:
        """Await `awaitable` for at most `within` seconds; a timeout or a failure inside it says where."""
        try:
            return await asyncio.wait_for(awaitable, within)
        except StepFailed:
            raise
        except Exception as exc:  # a timeout, or the room refused or lost: any of them is this step's failure
            detail = str(exc) or f"nothing within {within:.0f} s"
            raise self.failure(step, room, f"{type(exc).__name__}: {detail}", worker=worker) from exc

    async def until(
        self, holds: Callable[[], object], step: str, room: str, within: float, *, worker: str | None = None
    ) -> None:
        """Poll `holds()` until it is truthy; after `within` seconds fail saying where."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while not holds():
            if loop.time() >= deadline:
                raise self.failure(step, room, f"still not so after {within:.0f} s", worker=worker)
            await asyncio.sleep(POLL_S)
