"""Barge-in latency: the user starts speaking over a running search; how soon does the MCP server know?

Measured from the moment the worker's realtime session receives `input_audio_buffer.speech_started`
(the plugin's `input_speech_started` event, as the conversation's turn guard sees it) to the moment the
MCP server receives `notifications/cancelled` for the running `tools/call`. Both clocks are this
process's `time.perf_counter()`.

The conversation is the worker's own wiring (`build_conversation`, the real OpenAI Realtime plugin, the
research session and the gateway) on a mocked room, talking to the local Realtime stand-in. The MCP server
is the tests' real-SDK server with a slow search, run on its own thread and event loop as a separate
service would be, so its timestamps are not delayed by the worker's loop. Both gateway paths are measured:
`shared` (the worker's process-wide gateway on its own loop thread, what jobs use) and `direct` (a gateway
on the conversation's loop). Each round: a question, its search starts, the user barges in, the server
records the cancellation, the discarded answer comes back. Bounded: `--rounds` rounds, every wait timed.

`python bench/bargein.py [--rounds 50]` prints one JSON line and writes `bench/results/bargein.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from agent.mcp.gateway import GatewayOptions, McpGateway  # noqa: E402
from agent.mcp.shared import SharedGateway  # noqa: E402
from agent.settings import Settings  # noqa: E402
from agent.voice.conversation import build_conversation  # noqa: E402
from bench.stats import percentile  # noqa: E402
from realtime_standin import RealtimeStandIn  # noqa: E402
from tests.job_double import fake_job, mocked_room  # noqa: E402
from tests.mcp_fixture import FakeMcpServer, synthetic_source  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "bargein.json"
TARGET_P95_MS = 20.0
STEP_TIMEOUT_S = 30.0  # generous: a loaded host delays the model and the framework, not what is measured


class TimedMcpServer(FakeMcpServer):
    """The tests' MCP server, noting when each `tools/call` starts and each cancellation arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[tuple[str, float]] = []
        self.notify: threading.Event = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await super().__call__(scope, receive, send)
            return

        async def timed_receive() -> Any:
            message = await receive()
            if b'"notifications/cancelled"' in message.get("body", b""):
                self._mark("cancelled")
            return message

        await super().__call__(scope, timed_receive, send)

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        self._mark("call")
        return await super()._call_tool(ctx, params)

    def _mark(self, what: str) -> None:
        self.marks.append((what, time.perf_counter()))
        self.notify.set()

    async def wait_mark(self, what: str, after: int) -> float:
        """Timestamp of the first `what` mark at index >= `after`, waiting (bounded) on the server thread."""
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while time.monotonic() < deadline:
            for kind, at in self.marks[after:]:
                if kind == what:
                    return at
            self.notify.clear()
            await asyncio.to_thread(self.notify.wait, 0.05)
        raise TimeoutError(f"the MCP server saw no {what} within {STEP_TIMEOUT_S:.0f} s")


def serve_in_thread(server: TimedMcpServer) -> tuple[threading.Thread, threading.Event]:
    """Run the server on its own thread and event loop until `stop` is set."""
    started, stop = threading.Event(), threading.Event()

    async def main() -> None:
        await server.start()
        started.set()
        await asyncio.to_thread(stop.wait, 600)  # bounded: the benchmark stops it long before
        await server.stop()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="mcp-server", daemon=True)
    thread.start()
    if not started.wait(15):
        raise RuntimeError("the MCP server did not start")
    return thread, stop


async def measure(path: str, rounds: int, server: TimedMcpServer, standin: RealtimeStandIn) -> list[float]:
    options = GatewayOptions(url=server.url, call_timeout_s=8, connect_timeout_s=5, retry_delay_s=0.01)
    gateway: McpGateway | SharedGateway = SharedGateway(options) if path == "shared" else McpGateway(options)
    # Every round is a new search in one conversation: lift the per-conversation limit (20 a minute).
    settings = Settings(
        OPENAI_API_KEY="bench",
        OPENAI_BASE_URL=standin.base_url,
        LEXVOZ_REHEARSAL=False,
        LEXVOZ_SEARCHES_PER_MINUTE=10_000,
    )
    speech_at: list[float] = []
    heard_speech = asyncio.Event()
    room = mocked_room()
    latencies: list[float] = []
    async with aiohttp.ClientSession() as http:
        conversation = build_conversation(room, settings, gateway=gateway, greet=False, http_session=http)

        def watch(rt_session: Any) -> None:
            def on_speech(_ev: Any) -> None:
                speech_at.append(time.perf_counter())
                heard_speech.set()

            rt_session.on("input_speech_started", on_speech)

        conversation.model.session_listeners.append(watch)
        job = fake_job(room)
        job.__enter__()
        try:
            await conversation.start()
            await standin.wait_for_client_event("session.update", after=2, timeout=STEP_TIMEOUT_S)
            await gateway.connect()
            for i in range(rounds):
                marks = len(server.marks)
                outputs = len(standin.client_events("conversation.item.create"))
                await standin.inject_user_turn(f"pregunta lenta {i}")
                await server.wait_mark("call", marks)
                heard = len(speech_at)
                heard_speech.clear()
                await standin.inject_speech_started()  # the user talks over the running search
                cancelled_at = await server.wait_mark("cancelled", marks)
                await asyncio.wait_for(heard_speech.wait(), STEP_TIMEOUT_S)
                latencies.append((cancelled_at - speech_at[heard]) * 1000)
                # the discarded answer went back to the model: the round is over
                await standin.wait_for_client_event(
                    "conversation.item.create",
                    lambda e: e["item"]["type"] == "function_call_output",
                    after=outputs,
                    timeout=STEP_TIMEOUT_S,
                )
        finally:
            await conversation.session.aclose()
            await gateway.aclose()
            job.__exit__(None, None, None)
    return latencies


async def run(rounds: int) -> dict[str, Any]:
    server = TimedMcpServer()
    server.behaviour.results = [synthetic_source(1), synthetic_source(2)]
    server.behaviour.delay_s = 5.0  # long enough to barge in on; every search is cancelled well before
    thread, stop = serve_in_thread(server)
    figures: dict[str, Any] = {}
    try:
        async with RealtimeStandIn(speed=50.0, ms_per_char=5) as standin:
            for path in ("shared", "direct"):
                values = await measure(path, rounds, server, standin)
                figures[path] = {
                    "rounds": len(values),
                    "p50_ms": round(percentile(values, 50), 2),
                    "p95_ms": round(percentile(values, 95), 2),
                    "max_ms": round(max(values), 2),
                }
    finally:
        stop.set()
        thread.join(10)
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/bargein.py", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=50, help="barge-ins per gateway path (1-1000)")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if not 1 <= args.rounds <= 1000:
        p.error("--rounds must be between 1 and 1000")
    load_start = os.getloadavg()
    figures = asyncio.run(run(args.rounds))
    result = {
        "measure": "worker receives input_audio_buffer.speech_started -> MCP server receives notifications/cancelled",
        **figures,
        "target_p95_ms": TARGET_P95_MS,
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
