"""The reproduction again, with livekit-agents 1.8.9's own thread executor and CLI (`agent_worker.py`).

A worker started as in production (`python -m livekit.agents start`, not `--dev`) runs room B's job; then room
A's job (its room name contains "block") keeps its loop busy past the native library's 15 s wait for
ReadyForRoomEventRequest. The script records what the worker does with the resulting SIGTERM: whether B's job
still receives data and whether the worker takes a new room (C) afterwards; with `--twice` a second job (A2)
misses its handshake too. Each room has a person in it (a participant of this script), as a page would.
Run from the repository's root: `python -m research.threads.worker_repro [--twice] [--executor process]`
(~2 minutes; `--executor process` runs the same jobs in job processes, for comparison).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from research.threads.repro import API_KEY, API_SECRET, free_port, stop, token

AGENT = "threads-repro"
ROOM_B, ROOM_A, ROOM_A2, ROOM_C = "threads-b", "threads-block-a", "threads-block-a2", "threads-c"
SHOWN = ("repro:", "FFI Panic", "drain", "shutting down", "timed out", "registered worker", "exit", "job", "rror")


class WorkerLog:
    """The worker's output, each line stamped with the driver's clock; JSON log records reduced to their message."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.lines: list[tuple[float, str]] = []

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    async def read(self, stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            text = raw.decode(errors="replace").rstrip()
            with contextlib.suppress(ValueError):
                record = json.loads(text)
                if isinstance(record, dict):
                    text = str(record.get("message", text))
            self.lines.append((self.now(), text))

    def first(self, needle: str, after: float = 0.0) -> float | None:
        return next((t for t, text in self.lines if needle in text and t >= after), None)

    async def wait_for(self, needle: str, within_s: float, after: float = 0.0) -> float | None:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            found = self.first(needle, after)
            if found is not None:
                return found
            await asyncio.sleep(0.1)
        return None

    def count(self, needle: str, start: float, end: float) -> int:
        return sum(1 for t, text in self.lines if needle in text and start <= t < end)


async def main(worker_log: Path | None, twice: bool, executor: str) -> int:
    from livekit import api, rtc

    from agent.devstack import livekit_server

    port = free_port(18_600)
    log_file = Path(tempfile.mkstemp(prefix="threads-worker-repro-livekit-", suffix=".log")[1])
    lk = livekit_server.start(api_key=API_KEY, api_secret=API_SECRET, port=port, log_path=log_file)
    env = {
        **os.environ,
        "LIVEKIT_URL": f"ws://127.0.0.1:{port}",
        "LIVEKIT_API_KEY": API_KEY,
        "LIVEKIT_API_SECRET": API_SECRET,
        "THREADS_REPRO_EXECUTOR": executor,
    }
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "livekit.agents",
        "start",
        "research/threads/agent_worker.py",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    log = WorkerLog()
    assert worker.stdout is not None
    reader = asyncio.create_task(log.read(worker.stdout))
    lkapi = api.LiveKitAPI(f"http://127.0.0.1:{port}", API_KEY, API_SECRET)
    rooms_fed: list[str] = []

    async def feed() -> None:  # one data packet a second to every running room
        while True:
            for room in rooms_fed:
                with contextlib.suppress(api.TwirpError):
                    await lkapi.room.send_data(api.SendDataRequest(room=room, data=b"tick", topic="tick"))
            await asyncio.sleep(1.0)

    people: list[rtc.Room] = []

    async def dispatch(room: str) -> float:
        """A person joins the room (so livekit-server keeps it open), then the agent is asked for."""
        person = rtc.Room()
        await person.connect(f"ws://127.0.0.1:{port}", token(f"person-{room}", room))
        people.append(person)
        await lkapi.agent_dispatch.create_dispatch(api.CreateAgentDispatchRequest(agent_name=AGENT, room=room))
        return log.now()

    feeder = asyncio.create_task(feed())
    try:
        figures = await provoke(log, worker, dispatch, rooms_fed, twice)
    finally:
        feeder.cancel()
        for person in people:
            await person.disconnect()
        if worker.returncode is None:
            worker.kill()
        await worker.wait()
        await reader
        await lkapi.aclose()
        stop(lk)
        os.unlink(log_file)
    if worker_log is not None:
        with open(worker_log, "w") as out:  # noqa: ASYNC230 - after the run, nothing else waits on this loop
            out.writelines(f"{t:7.2f} {text}\n" for t, text in log.lines)
    shown_data = 0
    for t, text in log.lines:
        if "repro: data" in text:
            shown_data += 1
            if shown_data % 5 != 1:
                continue
        if any(k in text for k in SHOWN):
            print(f"{t:6.2f}s {text[:180]}")
    print(json.dumps(figures))
    return 0


async def provoke(
    log: WorkerLog,
    worker: asyncio.subprocess.Process,
    dispatch: Callable[[str], Awaitable[float]],
    rooms_fed: list[str],
    twice: bool,
) -> dict[str, object]:
    """B runs; A's handshake is missed (with `twice`, A2's too, 2 s later); C arrives after the first SIGTERM."""
    figures: dict[str, object] = {"registered_s": await log.wait_for("registered worker", 60)}
    await dispatch(ROOM_B)
    figures["b_connected_s"] = await log.wait_for(f"repro: connected room={ROOM_B}", 30)
    rooms_fed.append(ROOM_B)
    await asyncio.sleep(3)
    figures["a_dispatched_s"] = await dispatch(ROOM_A)
    if twice:
        await asyncio.sleep(2)
        figures["a2_dispatched_s"] = await dispatch(ROOM_A2)
    panic = await log.wait_for("FFI Panic", 40)
    figures["first_panic_s"] = panic
    if panic is None:
        return figures
    if twice:
        second = await log.wait_for("FFI Panic", 20, after=panic + 0.1)
        figures["second_panic_s"] = second
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(worker.wait(), 30)
        figures["worker_exit"] = worker.returncode
        figures["worker_exit_s"] = log.now() if worker.returncode is not None else None
        figures["b_data_before_first_panic"] = log.count(f"data room={ROOM_B}", 0, panic)
        figures["b_data_after_second_panic"] = log.count(f"data room={ROOM_B}", second or panic, log.now() + 1)
        return figures
    await asyncio.sleep(3)
    c_sent = await dispatch(ROOM_C)
    figures["c_dispatched_s"] = c_sent
    figures["c_job_started_s"] = await log.wait_for(f"repro: job started room={ROOM_C}", 15, after=c_sent)
    await asyncio.sleep(max(0.0, panic + 40 - log.now()))
    figures["b_data_before_first_panic"] = log.count(f"data room={ROOM_B}", 0, panic)
    figures["b_data_40s_after_first_panic"] = log.count(f"data room={ROOM_B}", panic, panic + 40)
    figures["worker_running_40s_after_first_panic"] = worker.returncode is None
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--worker-log", type=Path, help="also write the worker's whole output here, stamped")
    parser.add_argument("--twice", action="store_true", help="two jobs miss their handshake, 2 s apart")
    parser.add_argument("--executor", choices=["thread", "process"], default="thread", help="how the worker runs jobs")
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(args.worker_log, args.twice, args.executor)))
