"""A person who leaves ("Detener" on the page) leaves a clean worker log behind.

The page's Stop button disconnects from the room, whatever the agent is doing: searching, or speaking an
answer. The worker then ends the conversation and its job; none of that is a fault, so the worker's log
must get no traceback and no ERROR line from it. The person is a Python participant (`tests/person.py`)
against the real stack shared with other modules: the module begins once the worker has ended every earlier
conversation, and each test reads the worker's log from where it began, so what it reads is its own.
The races a Stop can hit, which a real stack only hits by chance, are pinned one by one in
`tests/test_leaving.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.person import AGENT_STATE_ATTRIBUTE, CHAT_TOPIC, Person

from .conftest import E2EStack

pytestmark = pytest.mark.e2e

JOIN_TIMEOUT_S = 45.0
ANSWER_TIMEOUT_S = 30.0
JOB_END_TIMEOUT_S = 30.0
# The last thing the job's own shutdown callback logs (the worker's MCP session closing), with the room.
JOB_ENDED = re.compile(r"MCP session to \S+ closed: job shutdown")
# What the job process may still log as it exits after that: a bounded look, since nothing marks the end.
AFTER_END_S = 2.0


JOB_STARTED = re.compile(r"MCP session opened to ")
ROOM = re.compile(r'"room": "([^"]+)"')
EARLIER_JOBS_END_S = 60.0


def _rooms_with(text: str, marker: re.Pattern[str]) -> set[str]:
    return {room.group(1) for line in text.splitlines() if marker.search(line) and (room := ROOM.search(line))}


@pytest.fixture(scope="module", autouse=True)
def earlier_jobs_ended(e2e_stack: E2EStack) -> None:
    """Wait until every conversation the shared worker began before this module has ended its job."""
    deadline = time.monotonic() + EARLIER_JOBS_END_S
    while True:
        text = _read_from(_worker_log(e2e_stack), 0)
        running = _rooms_with(text, JOB_STARTED) - _rooms_with(text, JOB_ENDED)
        if not running:
            return
        assert time.monotonic() < deadline, f"earlier conversations never ended: {sorted(running)}"
        time.sleep(0.2)


@pytest.fixture
async def person(e2e_stack: E2EStack) -> AsyncIterator[Person]:
    """A person in a fresh room whose agent has greeted and listens."""
    someone = Person(await e2e_stack.new_session())
    try:
        await asyncio.wait_for(someone.connect(), 20)
        await someone.wait_until_listening(JOIN_TIMEOUT_S)
        yield someone
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(someone.aclose(), 10)


def _worker_log(stack: E2EStack) -> Path:
    return stack.log_dir / "worker.log"


def _read_from(path: Path, offset: int) -> str:
    with path.open("rb") as log:
        log.seek(offset)
        return log.read().decode("utf-8", errors="replace")


async def _leave_and_wait_for_the_job_to_end(person: Person, stack: E2EStack, offset: int) -> str:
    """Disconnect as the page's Stop does; return what the worker logged until its job for the room ended."""
    await person.aclose()
    log = _worker_log(stack)
    deadline = asyncio.get_running_loop().time() + JOB_END_TIMEOUT_S
    while True:
        text = _read_from(log, offset)
        ended = [line for line in text.splitlines() if person.name in line and JOB_ENDED.search(line)]
        if ended or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.2)
    assert ended, f"the job for room {person.name} did not end within {JOB_END_TIMEOUT_S:.0f} s:\n{text}"
    await asyncio.sleep(AFTER_END_S)
    return _read_from(log, offset)


ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the dev console colours the level names


def _assert_clean(text: str) -> None:
    plain = ANSI.sub("", text)
    assert "Traceback" not in plain, plain
    errors = [line for line in plain.splitlines() if re.search(r"\bERROR\b|\bCRITICAL\b", line)]
    assert errors == [], "\n".join(errors)


async def test_leaving_while_a_search_runs_logs_no_traceback(person: Person, e2e_stack: E2EStack) -> None:
    offset = _worker_log(e2e_stack).stat().st_size
    await person.room.local_participant.send_text(e2e_stack.question, topic=CHAT_TOPIC)
    started = await person.wait_for(lambda: person.first("started"), "started message", ANSWER_TIMEOUT_S)
    assert person.outcome_of(started.call_id) is None  # the search (2.5 s test delay) is still running
    _assert_clean(await _leave_and_wait_for_the_job_to_end(person, e2e_stack, offset))


async def test_leaving_right_after_typing_a_question_logs_no_traceback(person: Person, e2e_stack: E2EStack) -> None:
    offset = _worker_log(e2e_stack).stat().st_size
    await person.room.local_participant.send_text(e2e_stack.question, topic=CHAT_TOPIC)
    _assert_clean(await _leave_and_wait_for_the_job_to_end(person, e2e_stack, offset))


async def test_leaving_while_the_agent_speaks_its_answer_logs_no_traceback(person: Person, e2e_stack: E2EStack) -> None:
    offset = _worker_log(e2e_stack).stat().st_size
    await person.room.local_participant.send_text(e2e_stack.question, topic=CHAT_TOPIC)
    started = await person.wait_for(lambda: person.first("started"), "started message", ANSWER_TIMEOUT_S)
    await person.wait_for(lambda: person.outcome_of(started.call_id), "evidence outcome", ANSWER_TIMEOUT_S)

    def speaking() -> bool:
        agent = person.room.remote_participants.get(person.agent_identity or "")
        return agent is not None and agent.attributes.get(AGENT_STATE_ATTRIBUTE) == "speaking"

    await person.wait_for(speaking, "agent speaking its answer", ANSWER_TIMEOUT_S)
    _assert_clean(await _leave_and_wait_for_the_job_to_end(person, e2e_stack, offset))
