"""What each program of the stack costs while a benchmark runs: memory at its peak and CPU seconds used.

A program is a process and everything it started (the worker's job processes, its forkserver). Memory is
sampled on a fixed interval and the peak kept, as RSS (what `top` shows; shared pages counted in every
process) and PSS (shared pages divided among the processes sharing them: the honest sum for forked job
processes). CPU is the user+system time of the tree between `start()` and `stop()`, including children
that exited in between (their time is kept from the last sample that saw them alive).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import psutil


@dataclass
class TreeStats:
    """Peak memory and CPU time of one process tree."""

    name: str
    root_pid: int
    with_children: bool = True
    peak_rss_mb: float = 0.0
    peak_pss_mb: float = 0.0
    peak_processes: int = 0
    cpu_start_s: float | None = None
    _cpu_seen: dict[int, float] = field(default_factory=dict)
    _cpu_base: dict[int, float] = field(default_factory=dict)

    def _tree(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.root_pid)
            return [root, *root.children(recursive=True)] if self.with_children else [root]
        except psutil.NoSuchProcess:
            return []

    def sample(self, *, memory: bool = True) -> None:
        rss = pss = 0.0
        procs = self._tree()
        for proc in procs:
            try:
                times = proc.cpu_times()
                self._cpu_seen[proc.pid] = times.user + times.system
                if memory:
                    info = proc.memory_full_info()
                    rss += info.rss
                    pss += getattr(info, "pss", info.rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if memory:
            self.peak_rss_mb = max(self.peak_rss_mb, rss / 2**20)
            self.peak_pss_mb = max(self.peak_pss_mb, pss / 2**20)
            self.peak_processes = max(self.peak_processes, len(procs))

    def mark_cpu_start(self) -> None:
        self.sample(memory=False)
        self._cpu_base = dict(self._cpu_seen)

    def cpu_s(self) -> float:
        """CPU seconds since `mark_cpu_start`, over every process of the tree seen since then."""
        return sum(used - self._cpu_base.get(pid, 0.0) for pid, used in self._cpu_seen.items())

    def figures(self) -> dict[str, float | int]:
        return {
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "peak_pss_mb": round(self.peak_pss_mb, 1),
            "peak_processes": self.peak_processes,
            "cpu_s": round(self.cpu_s(), 2),
        }


class Sampler:
    """Samples every tree every `interval_s` until stopped (bounded by the benchmark that owns it).

    Once a second: reading smaps_rollup of every process of every tree is itself work the kernel bills to the
    load generator, and memory in these runs moves over seconds, not half-seconds."""

    def __init__(self, trees: list[TreeStats], interval_s: float = 1.0) -> None:
        self.trees = trees
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def start(self) -> None:
        for tree in self.trees:
            tree.mark_cpu_start()
        self._task = asyncio.create_task(self._run(), name="process-sampler")

    async def _run(self) -> None:
        while not self._stop.is_set():
            for tree in self.trees:
                await asyncio.to_thread(tree.sample)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval_s)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        for tree in self.trees:
            tree.sample(memory=False)
