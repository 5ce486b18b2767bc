"""What one room's missed ReadyForRoomEventRequest does to the other rooms of the same process.

livekit-agents' thread executor runs each job on its own thread and event loop inside the worker's process, and
all of them share the one native livekit library (`livekit` 1.1.21). Here a child process does the same with two
rooms against a local livekit-server: room B connects and keeps receiving data the parent sends it through the
server API; then room A connects in one of these ways:

- `healthy`: A's loop is free (control: nothing should happen to anyone);
- `block`: A's loop is busy for 20 s right after the ConnectRequest (a job thread that is starved of CPU or runs
  synchronous code), so the ConnectCallback waits and `Room.connect` cannot send ReadyForRoomEventRequest;
- `cancel`: A's `Room.connect` is cancelled while it waits for its ConnectCallback (a job shut down or timed out
  while connecting; livekit/python-sdks#784);
- `closed-loop`: A's connect is cancelled and its loop closed, as when a job thread ends while it connects;
- `starve-N`: A's loop is free, but N other threads of the process spin in Python from just before A connects
  (a process whose interpreter lock is contended by N busy conversations), to see how long the handshake takes.

The native library waits 15 s for ReadyForRoomEventRequest after its ConnectCallback, then closes room A and
sends a "panic" event; the Python SDK's event callback answers every panic with SIGTERM to its own process. With
`--on-sigterm exit` the child keeps the default SIGTERM disposition (a process that ends on it, as livekit-agents'
worker does: its handler drains the worker and ends every job); with `--on-sigterm log` it only records the signal
(livekit-agents' job processes ignore SIGTERM), which shows what the native library itself does to room B.

Run from the repository's root: `python -m research.threads.repro` (all scenarios, ~4 minutes) or
`python -m research.threads.repro --scenario block:exit`. It prints each scenario's timeline and one JSON line
with its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

API_KEY = "threads-repro"
API_SECRET = "threads-repro-secret-0123456789abcdef"
ROOM_A, ROOM_B = "threads-room-a", "threads-room-b"
BLOCK_S = 20.0  # longer than the native library's 15 s wait for ReadyForRoomEventRequest
CHILD_RUN_S = 38.0  # how long a child that survives keeps its rooms
SCENARIOS = ["healthy:exit", "block:exit", "cancel:exit", "closed-loop:exit", "block:log", "cancel:log"]
AFTER_EXIT_S = 60.0  # how long the parent keeps asking the server whether job-b is still in its room

_started = time.monotonic()
_emit_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    """One JSON line on stdout, written whole (several threads emit); the parent also stamps it on receipt."""
    line = json.dumps({"event": event, "t": round(time.monotonic() - _started, 2), **fields}) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


# --------------------------------------------------------------------------------------------------- the child


class LoopThread:
    """A thread running its own event loop, as livekit-agents' thread executor gives each job."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        self.loop.close()
        emit("loop_closed", room=self.name)

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


def token(identity: str, room: str) -> str:
    from livekit import api

    grants = api.VideoGrants(room_join=True, room=room)
    return api.AccessToken(API_KEY, API_SECRET).with_identity(identity).with_grants(grants).to_jwt()


_rooms: list[Any] = []  # keeps the rooms alive for the child's whole run


async def run_room_b(url: str, connected: threading.Event) -> None:
    from livekit import rtc

    room = rtc.Room()
    _rooms.append(room)
    received = 0

    def on_data(_packet: rtc.DataPacket) -> None:
        nonlocal received
        received += 1
        emit("b_data", n=received)

    room.on("data_received", on_data)
    room.on("disconnected", lambda reason: emit("b_disconnected", reason=int(reason)))
    await room.connect(url, token("job-b", ROOM_B))
    emit("b_connected")
    connected.set()


async def run_room_a(url: str, mode: str) -> None:
    from livekit import rtc

    room = rtc.Room()
    _rooms.append(room)
    room.on("disconnected", lambda reason: emit("a_disconnected", reason=int(reason)))
    connect = asyncio.create_task(room.connect(url, token("job-a", ROOM_A)))
    await asyncio.sleep(0)  # connect's first step sends the ConnectRequest, then awaits the ConnectCallback
    emit("a_connect_sent")
    sent = time.monotonic()
    if mode == "block":
        time.sleep(BLOCK_S)  # noqa: ASYNC251 - the point: this loop is busy, the ConnectCallback waits in its queue
        emit("a_loop_free")
    elif mode in ("cancel", "closed-loop"):
        connect.cancel()
    try:
        await connect
        emit("a_connected", isconnected=room.isconnected(), connect_s=round(time.monotonic() - sent, 2))
    except asyncio.CancelledError:
        emit("a_connect_cancelled")
    except Exception as exc:
        emit("a_connect_failed", error=type(exc).__name__, message=str(exc)[:200])
    if mode == "closed-loop":
        asyncio.get_running_loop().stop()
        return
    if mode == "block":
        try:  # is the room the native library closed still usable from Python?
            await asyncio.wait_for(room.local_participant.publish_data(b"after", topic="probe"), 5)
            emit("a_publish_ok")
        except Exception as exc:
            emit("a_publish_failed", error=type(exc).__name__, message=str(exc)[:200])


def spin(go: threading.Event) -> None:
    """Pure Python work that never waits: it holds the interpreter lock whenever the scheduler gives it a turn."""
    go.wait()
    n = 0
    while True:
        n = (n + 1) % 1_000_003


def child_main(url: str, mode: str, on_sigterm: str) -> int:
    if on_sigterm == "log":

        def on_term(_sig: int, _frame: FrameType | None) -> None:
            emit("sigterm_received")

        signal.signal(signal.SIGTERM, on_term)
    b, a = LoopThread("b"), LoopThread("a")
    connected = threading.Event()
    b.submit(run_room_b(url, connected)).result(timeout=30)
    time.sleep(1.0)  # B receives a little data first
    if mode.startswith("starve-"):
        busy, go = int(mode.removeprefix("starve-")), threading.Event()
        for i in range(busy):  # started idle, then released together: starting them while others spin takes long
            threading.Thread(target=spin, args=(go,), name=f"busy-{i}", daemon=True).start()
        go.set()
        emit("busy_threads_started", n=busy)
    a.submit(run_room_a(url, mode))
    deadline = time.monotonic() + CHILD_RUN_S
    while time.monotonic() < deadline:
        time.sleep(0.2)
    emit("child_done")
    os._exit(0)  # the rooms' native threads would otherwise keep the interpreter waiting at exit


# -------------------------------------------------------------------------------------------------- the parent


@dataclass
class Scenario:
    mode: str
    on_sigterm: str
    lines: list[tuple[float, str, str]] = field(default_factory=list)  # (t, stream, text)
    polls: list[tuple[float, bool, bool]] = field(default_factory=list)  # (t, job-b in its room, job-a in its)
    returncode: int | None = None


@dataclass
class Outcome:
    scenario: str
    a_connect_sent_s: float | None
    panic_s: float | None
    panic_message: str | None
    child_exit: str
    child_ended_s: float | None
    b_data_before_panic: int
    b_data_after_panic: int
    b_in_room_last_poll: bool | None
    b_gone_from_server_s: float | None
    a_connect_s: float | None
    a_events: list[str]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop livekit-server: it waits for its rooms to empty on SIGTERM, so SIGKILL after a few seconds."""
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def free_port(start: int = 18_400) -> int:
    from agent.devstack import livekit_server

    def bindable(port: int, kind: socket.SocketKind) -> bool:
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    for port in range(start, start + 500):
        if port % 50 == 7880 % 50:
            continue
        if bindable(port, socket.SOCK_STREAM) and bindable(port + 1, socket.SOCK_STREAM):
            if all(bindable(p, socket.SOCK_DGRAM) for p in livekit_server.media_ports(port)):
                return port
    raise RuntimeError("no free port for livekit-server")


async def run_scenario(scenario: Scenario, port: int) -> None:
    from livekit import api

    url = f"ws://127.0.0.1:{port}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "research.threads.repro",
        "--child",
        url,
        scenario.mode,
        scenario.on_sigterm,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    t0 = time.monotonic()

    async def read(stream: asyncio.StreamReader | None, name: str) -> None:
        assert stream is not None
        async for raw in stream:
            scenario.lines.append((round(time.monotonic() - t0, 2), name, raw.decode(errors="replace").rstrip()))

    readers = [asyncio.create_task(read(proc.stdout, "out")), asyncio.create_task(read(proc.stderr, "err"))]
    lkapi = api.LiveKitAPI(f"http://127.0.0.1:{port}", API_KEY, API_SECRET)
    try:
        while proc.returncode is None and time.monotonic() - t0 < CHILD_RUN_S + 15:
            present: list[bool] = []
            for room in (ROOM_B, ROOM_A):
                try:
                    listed = await lkapi.room.list_participants(api.ListParticipantsRequest(room=room))
                    present.append(any(p.identity.startswith("job-") for p in listed.participants))
                except api.TwirpError:
                    present.append(False)  # the room does not exist (yet, or any more)
            scenario.polls.append((round(time.monotonic() - t0, 2), present[0], present[1]))
            if present[0]:
                with contextlib.suppress(api.TwirpError):
                    await lkapi.room.send_data(api.SendDataRequest(room=ROOM_B, data=b"tick", topic="tick"))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), 1.0)
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        scenario.returncode = proc.returncode
        await asyncio.gather(*readers)
        ended = time.monotonic()
        while time.monotonic() - ended < AFTER_EXIT_S:  # when does the server see job-b gone?
            try:
                listed = await lkapi.room.list_participants(api.ListParticipantsRequest(room=ROOM_B))
                b_in = any(p.identity == "job-b" for p in listed.participants)
            except api.TwirpError:
                b_in = False
            scenario.polls.append((round(time.monotonic() - t0, 2), b_in, False))
            if not b_in:
                break
            await asyncio.sleep(1.0)
        # the other room, seen from the server once the child has gone or kept running
        for room in (ROOM_A, ROOM_B):
            with contextlib.suppress(api.TwirpError):
                await lkapi.room.delete_room(api.DeleteRoomRequest(room=room))
    finally:
        await lkapi.aclose()


def first_gone(polls: list[tuple[float, bool, bool]]) -> float | None:
    """When the server first listed job-b no longer in its room, after it had been there."""
    seen = False
    for t, b_in, _a_in in polls:
        seen = seen or b_in
        if seen and not b_in:
            return t
    return None


def outcome(s: Scenario) -> Outcome:
    events = [(t, json.loads(text)) for t, stream, text in s.lines if stream == "out" and text.endswith("}")]
    panic = next(((t, text) for t, stream, text in s.lines if stream == "err" and "FFI Panic" in text), None)
    panic_s = panic[0] if panic else None
    sent = next((t for t, e in events if e["event"] == "a_connect_sent"), None)
    b_data = [t for t, e in events if e["event"] == "b_data"]
    cut = panic_s if panic_s is not None else sent if sent is not None else 0.0
    rc = s.returncode
    exit_text = "none" if rc is None else f"signal {signal.Signals(-rc).name}" if rc < 0 else f"code {rc}"
    last_out = max((t for t, _stream, _text in s.lines), default=None)
    return Outcome(
        scenario=f"{s.mode}:{s.on_sigterm}",
        a_connect_sent_s=sent,
        panic_s=panic_s,
        panic_message=panic[1][:160] if panic else None,
        child_exit=exit_text,
        child_ended_s=last_out,
        b_data_before_panic=sum(1 for t in b_data if t < cut),
        b_data_after_panic=sum(1 for t in b_data if t >= cut),
        b_in_room_last_poll=s.polls[-1][1] if s.polls else None,
        b_gone_from_server_s=first_gone(s.polls),
        a_connect_s=next((e.get("connect_s") for _t, e in events if e["event"] == "a_connected"), None),
        a_events=[e["event"] for _t, e in events if e["event"].startswith(("a_", "sigterm", "loop_"))],
    )


def print_timeline(s: Scenario) -> None:
    print(f"\n=== {s.mode}:{s.on_sigterm} ===")
    shown_data = 0
    for t, stream, text in s.lines:
        if stream == "out" and '"b_data"' in text:
            shown_data += 1
            if shown_data % 5 != 1:
                continue  # every fifth data packet is enough to see B alive
        if stream == "err" and not any(k in text for k in ("Panic", "ReadyForRoomEvent", "Error", "error")):
            continue
        print(f"{t:6.2f}s {stream}: {text[:200]}")
    gone = first_gone(s.polls)
    print(f"server polls: {len(s.polls)}; job-b gone from its room (server's view) at: {gone if gone else 'never'}")


async def parent_main(scenarios: list[str]) -> int:
    from livekit.rtc import __version__ as rtc_version

    from agent.devstack import livekit_server

    port = free_port()
    log = Path(tempfile.mkstemp(prefix="threads-repro-livekit-", suffix=".log")[1])
    server = livekit_server.start(api_key=API_KEY, api_secret=API_SECRET, port=port, log_path=log)
    python = sys.version.split()[0]
    print(f"livekit {rtc_version}, livekit-server {livekit_server.VERSION} on port {port}, python {python}")
    try:
        for name in scenarios:
            mode, on_sigterm = name.split(":")
            scenario = Scenario(mode, on_sigterm)
            await run_scenario(scenario, port)
            print_timeline(scenario)
            print(json.dumps(asdict(outcome(scenario))))
    finally:
        stop(server)
        os.unlink(log)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenario", action="append", help="MODE:ON_SIGTERM, e.g. block:exit (default: all six)")
    parser.add_argument("--child", nargs=3, metavar=("URL", "MODE", "ON_SIGTERM"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        url, mode, on_sigterm = args.child
        return child_main(url, mode, on_sigterm)
    return asyncio.run(parent_main(args.scenario or SCENARIOS))


if __name__ == "__main__":
    raise SystemExit(main())
