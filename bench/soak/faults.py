"""The faults the soak injects, each with the moment it began and the moment it was cleared.

Why these: they are what a deployment sees break, and each already has a short test of its own; the soak
repeats them for as long as it runs, with people talking, so that the tenth time is tested as well as the
first. "Cleared" is when the broken part is whole again (the search server healthy, the proxy fast, the
stand-in accepting sockets, livekit-server answering, the database accepting connections, the worker
registered); the recovery figure runs from there to the next answered question.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from bench.soak.programs import SEARCH_PROXY, Programs

KINDS = ("search_killed", "search_slow", "model_dropped", "livekit_restarted", "worker_restarted", "ledger_db_stopped")


@dataclass
class FaultOptions:
    search_down_s: float = 3.0  # killed, then started again after this long
    slow_latency_ms: int = 10_000  # past the tool's 8 s deadline
    slow_for_s: float = 15.0
    livekit_down_s: float = 2.0
    worker_down_s: float = 2.0
    ledger_down_s: float = 60.0


@dataclass
class Fault:
    kind: str
    injected_at: float
    cleared_at: float | None = None
    detail: dict[str, object] = field(default_factory=dict)
    error: str | None = None


class Injector:
    """Injects one fault at a time (the ledger's database on its own track) and records each."""

    def __init__(self, programs: Programs, opts: FaultOptions) -> None:
        self.programs = programs
        self.opts = opts
        self.faults: list[Fault] = []
        self._next_worker = 0

    async def inject(self, kind: str) -> Fault:
        fault = Fault(kind, time.monotonic())
        self.faults.append(fault)
        action: Callable[[Fault], Awaitable[None]] = getattr(self, f"_{kind}")
        try:
            await action(fault)
            fault.cleared_at = time.monotonic()
        except Exception as exc:  # a fault that could not be injected or cleared is a finding, not a crash
            fault.error = f"{type(exc).__name__}: {exc}"
        return fault

    async def _search_killed(self, fault: Fault) -> None:
        await asyncio.to_thread(self.programs.kill_search)
        await asyncio.sleep(self.opts.search_down_s)
        await asyncio.to_thread(self.programs.start_search)

    async def _search_slow(self, fault: Fault) -> None:
        toxi = self.programs.toxi
        async with aiohttp.ClientSession() as http:
            await toxi.add_latency(http, SEARCH_PROXY, self.opts.slow_latency_ms)
            fault.detail["latency_ms"] = self.opts.slow_latency_ms
            try:
                await asyncio.sleep(self.opts.slow_for_s)
            finally:
                await toxi.clear(http, SEARCH_PROXY)

    async def _model_dropped(self, fault: Fault) -> None:
        url = f"{self.programs.stack.standin_url}/control/drop_connections"
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json={"mid_answer": True, "within_s": 30}) as resp:
                resp.raise_for_status()
                fault.detail.update(await resp.json())
        fault.injected_at = time.monotonic()  # the drop itself, not the wait for an answer to cut

    async def _livekit_restarted(self, fault: Fault) -> None:
        await asyncio.to_thread(self.programs.stack.stop_child, "livekit-server")
        await asyncio.sleep(self.opts.livekit_down_s)
        await asyncio.to_thread(self.programs.stack._start_livekit)

    async def _worker_restarted(self, fault: Fault) -> None:
        names = sorted(self.programs.workers)
        if not names:
            raise RuntimeError("no worker left to restart")
        name = names[self._next_worker % len(names)]
        self._next_worker += 1
        fault.detail["worker"] = name
        await asyncio.to_thread(self.programs.kill_worker, name)
        await asyncio.sleep(self.opts.worker_down_s)
        await asyncio.to_thread(self.programs.start_worker, name)

    async def _ledger_db_stopped(self, fault: Fault) -> None:
        await asyncio.to_thread(self.programs.pg.stop, "fast")
        try:
            await asyncio.sleep(self.opts.ledger_down_s)
        finally:
            await asyncio.to_thread(self.programs.pg.start)


def schedule(minutes: float, warmup_s: float, tail_s: float) -> tuple[list[tuple[float, str]], list[float]]:
    """When each page-facing fault starts (seconds from the start of the talk), in a repeating cycle, and when
    the ledger's database is stopped (on its own track: it is not seen by the page). At least one of each."""
    total = minutes * 60
    page_kinds = [k for k in KINDS if k != "ledger_db_stopped"]
    window = max(total - warmup_s - tail_s, 1.0)
    slot = max(window / len(page_kinds), 20.0) if minutes <= 5 else 60.0
    page: list[tuple[float, str]] = []
    at = warmup_s
    i = 0
    while at < total - tail_s or i < len(page_kinds):
        page.append((at, page_kinds[i % len(page_kinds)]))
        at += slot
        i += 1
    cycle = slot * len(page_kinds)
    ledger = [warmup_s + slot / 2 + n * cycle for n in range(max(1, int(window // cycle) + (window % cycle > 0)))]
    return page, [t for t in ledger if t < total - tail_s] or [warmup_s]
