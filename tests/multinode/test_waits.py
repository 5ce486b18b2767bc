"""A failed wait of the two-node suite says where: step, room, worker by name, and the tail of that worker's log.

No cluster here (these run in the fast suite): the witness is given two logs and who held which room.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from .waits import TAIL_LINES, StepFailed, Where, Witness, failure_record

STEP = "waiting for an agent after worker-a stopped"


@pytest.fixture
def witness(tmp_path: Path) -> Witness:
    logs = {}
    for name in ("worker-a", "worker-b"):
        log = tmp_path / f"{name}.log"
        lines = [f'{{"message": "{name} line {i}"}}' for i in range(TAIL_LINES + 10)]
        log.write_text("\n".join(lines) + "\n")
        logs[name] = log
    return Witness(logs, {"room-held-by-a": "worker-a"}.get)


async def test_a_wait_that_never_holds_names_step_room_and_the_worker_it_was_given(witness: Witness) -> None:
    with pytest.raises(StepFailed) as failed:
        await witness.until(lambda: False, STEP, "room-x", 0.05, worker="worker-b")

    text = str(failed.value)
    first = text.splitlines()[0]
    assert "room room-x" in first and STEP in first and "worker: worker-b" in first, first
    assert failed.value.where == Where(step=STEP, room="room-x", worker="worker-b")
    # the tail of that worker's log, its last lines only, and not the other worker's
    assert "worker-b line 39" in text and f"worker-b line {39 - TAIL_LINES}" not in text
    assert "worker-a line" not in text


async def test_a_wait_without_a_named_worker_names_the_one_whose_log_has_the_room(witness: Witness) -> None:
    with pytest.raises(StepFailed) as failed:
        await witness.until(lambda: None, "joining", "room-held-by-a", 0.05)
    assert failed.value.where.worker == "worker-a"
    assert "worker: worker-a" in str(failed.value).splitlines()[0]
    assert "worker-a line 39" in str(failed.value) and "worker-b line" not in str(failed.value)


async def test_a_room_no_worker_took_says_so_and_shows_every_workers_log(witness: Witness) -> None:
    with pytest.raises(StepFailed) as failed:
        await witness.until(lambda: False, "joining through node B", "room-nobody", 0.05)
    first = str(failed.value).splitlines()[0]
    assert "room room-nobody" in first and "joining through node B" in first, first
    assert "no worker received its job" in first, first
    assert "worker-a line 39" in str(failed.value) and "worker-b line 39" in str(failed.value)


async def test_an_awaited_step_that_times_out_or_raises_says_where(witness: Witness) -> None:
    async def never() -> None:
        await asyncio.Event().wait()

    with pytest.raises(StepFailed) as timed_out:
        await witness.wait(never(), "asking a typed question", "room-held-by-a", 0.05)
    assert timed_out.value.where == Where("asking a typed question", "room-held-by-a", "worker-a")
    assert "TimeoutError" in str(timed_out.value).splitlines()[0]

    async def refused() -> None:
        raise TimeoutError("room room-held-by-a: no evidence outcome within 30 s; messages so far: []")

    with pytest.raises(StepFailed) as inner:
        await witness.wait(refused(), "asking a typed question", "room-held-by-a", 5, worker="worker-b")
    assert "no evidence outcome within 30 s" in str(inner.value).splitlines()[0]
    assert inner.value.where.worker == "worker-b"


def test_a_check_that_holds_is_silent_and_one_that_fails_says_where(witness: Witness) -> None:
    witness.check(True, "after its answer", "room-x", "never shown")
    with pytest.raises(StepFailed) as failed:
        witness.check([], "after its answer", "room-held-by-a", "the room's job is in no worker's log")
    first = str(failed.value).splitlines()[0]
    assert first == (
        "room room-held-by-a: after its answer [worker: worker-a]: the room's job is in no worker's log"
    ), first


def test_where_is_written_as_one_json_object(witness: Witness) -> None:
    where = witness.where("joining", "room-held-by-a")
    assert json.loads(where.to_json()) == {"step": "joining", "room": "room-held-by-a", "worker": "worker-a"}


def test_the_failure_record_carries_where_or_says_the_failure_was_outside_the_named_steps(witness: Witness) -> None:
    failed = witness.failure("joining through node A", "room-held-by-a", "TimeoutError: no agent")
    assert failure_record("t.py::x", "call", failed) == {
        "test": "t.py::x",
        "when": "call",
        "step": "joining through node A",
        "room": "room-held-by-a",
        "worker": "worker-a",
        "detail": "TimeoutError: no agent",
    }
    other = failure_record("t.py::y", "setup", KeyError("k"))
    assert other["step"] == "setup: outside the suite's named steps" and other["detail"] == "KeyError: 'k'"


def test_the_tail_shows_the_rooms_own_lines_even_when_older_and_leaves_stacks_out(tmp_path: Path) -> None:
    log = tmp_path / "worker-a.log"
    about = {"message": "received job request", "level": "INFO", "room": "room-old", "job_id": "AJ_1"}
    blocked = {"message": "event loop blocked for 480ms", "level": "WARNING", "stack": "File x.py " * 200}
    lines = [json.dumps(about), *(json.dumps(blocked) for _ in range(TAIL_LINES + 5))]
    log.write_text("\n".join(lines) + "\n")
    text = str(Witness({"worker-a": log}, lambda _room: "worker-a").failure("joining", "room-old", "no agent"))
    assert "INFO room=room-old job_id=AJ_1 received job request" in text
    assert "WARNING event loop blocked for 480ms" in text and "File x.py" not in text
