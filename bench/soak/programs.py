"""The programs the soak runs, restarts and watches: the stack in rehearsal mode, two workers, PostgreSQL for the
ledger, and toxiproxy in front of the search server.

Why its own setup and not `Stack` alone: the faults need handles `Stack` does not give (kill the search server
and start it again on the same port, restart livekit-server, stop the ledger's database, kill one of two workers),
and the figures need every program's process at every moment, across restarts. Everything listens on 127.0.0.1
on free ports; everything is stopped at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from agent.devstack.processes import terminate, wait_for_text
from agent.devstack.stack import Stack, StackOptions
from bench.soak.toxiproxy import Toxiproxy
from tests import constitution
from tests.ports import free_port
from tests.postgres_server import PostgresServer

SEARCH_PROXY = "search"


@dataclass
class Sample:
    at: float
    pid: int
    rss_mb: float
    fds: int


@dataclass
class Watched:
    """One program across its incarnations: how to find its process now, and what was sampled."""

    name: str
    samples: list[Sample] = field(default_factory=list)


class Programs:
    """Start, fault and stop the soak's programs."""

    def __init__(self, base: Path, *, conversations: int, speed: float, workers: int = 2) -> None:
        self.base = base
        self.log_dir = base / "log"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.pg = PostgresServer()
        self.toxi = Toxiproxy(free_port(), self.log_dir / "toxiproxy.log")
        self.proxy_port = free_port()
        self.worker_count = workers
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.planned_exits: set[int] = set()  # worker pids the soak itself killed
        self.unplanned_exits: list[tuple[str, int, int | None]] = []
        self.ledger_url = ""
        from bench.load import SPOKEN_QUESTION, _index_cache, _livekit_port

        data_dir = base / "data"
        data_dir.mkdir()
        self._index_cached, self._index_seeded = _index_cache(data_dir)
        self.options = StackOptions(
            livekit_port=_livekit_port(),
            search_port=free_port(),
            web_port=free_port(),
            standin_port=free_port(),
            rehearsal=True,
            source=constitution.require(),
            data_dir=data_dir,
            log_dir=self.log_dir,
            standin_args=["--speed", str(speed), "--fallback-transcript", SPOKEN_QUESTION],
            start_worker=False,
            worker_env={
                "LEXVOZ_MAX_JOBS": str(conversations + 1),  # one worker alone can carry everyone
                "LEXVOZ_MCP_URL": f"http://127.0.0.1:{self.proxy_port}/mcp",
            },
        )
        self.stack = Stack(self.options)
        self.watched = {name: Watched(name) for name in self.names()}

    def names(self) -> list[str]:
        fixed = ["livekit-server", "search", "realtime-standin", "web", "postgres", "toxiproxy"]
        return fixed + [f"worker-{n}" for n in range(1, self.worker_count + 1)]

    # -- start and stop -------------------------------------------------------------------------

    def start(self) -> None:
        self.pg.start()
        self.ledger_url = self.pg.create_database("lexvoz_ledger")
        # every part that reads the ledger's settings (the worker, the page service) uses the same store
        os.environ["LEXVOZ_LEDGER_URL"] = self.ledger_url
        # the local files beside the ledger (its digest key, the spool of entries unwritten while the database
        # is down) go in this run's folder, shared by every program of the run as they would be on one host
        os.environ["LEXVOZ_LEDGER_PATH"] = str(self.base / "var" / "ledger.sqlite3")
        subprocess.run(
            [sys.executable, "-m", "agent", "ledger", "migrate"],
            env={**os.environ},
            check=True,
            capture_output=True,
            timeout=120,
        )
        self.toxi.start()
        self.stack.start()
        self.toxi.create(SEARCH_PROXY, self.proxy_port, self.options.search_port)
        if not self._index_seeded:
            from bench.load import _save_index

            _save_index(self.options.data_dir, self._index_cached)
        for n in range(1, self.worker_count + 1):
            self.start_worker(f"worker-{n}")

    def start_worker(self, name: str) -> None:
        env = {**self.stack.common_env(), **self.options.worker_env}
        log = self.log_dir / f"{name}.log"
        offset = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "agent", "start"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.workers[name] = proc
        wait_for_text(log, "registered worker", proc, timeout=120, offset=offset)  # this run's, not the last

    def kill_worker(self, name: str) -> None:
        """SIGKILL the worker's whole process group: a crashed host, its conversations gone with it."""
        proc = self.workers.pop(name)
        self.planned_exits.add(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)

    def kill_search(self) -> None:
        child = next(c for c in self.stack.children if c.name == "search")
        try:
            os.killpg(child.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.proc.wait(10)
        self.stack.children.remove(child)

    def start_search(self) -> None:
        self.stack._start_search()

    def restart_livekit(self) -> None:
        self.stack.stop_child("livekit-server")
        self.stack._start_livekit()

    def check_workers(self) -> None:
        """Note every worker that exited without the soak killing it."""
        for name, proc in list(self.workers.items()):
            if proc.poll() is not None and proc.pid not in self.planned_exits:
                self.unplanned_exits.append((name, proc.pid, proc.returncode))
                self.workers.pop(name)

    def stop(self) -> None:
        for name in list(self.workers):
            proc = self.workers.pop(name)
            terminate(proc, timeout=30)
        self.stack.stop()
        self.toxi.stop()
        self.pg.cleanup()

    # -- watching -------------------------------------------------------------------------------

    def pid_of(self, name: str) -> int | None:
        if name in self.workers:
            return self.workers[name].pid
        if name == "toxiproxy":
            return self.toxi.proc.pid if self.toxi.proc else None
        if name == "postgres":
            pidfile = self.pg.data / "postmaster.pid"
            try:
                return int(pidfile.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                return None
        child = next((c for c in self.stack.children if c.name == name), None)
        return child.proc.pid if child else None

    def sample(self) -> None:
        """RSS and open descriptors of each program's own long-lived process (not its job processes, which
        come and go with conversations: a leak grows in what stays)."""
        now = time.monotonic()
        for name, watched in self.watched.items():
            pid = self.pid_of(name)
            if pid is None:
                continue
            try:
                proc = psutil.Process(pid)
                watched.samples.append(Sample(now, pid, proc.memory_info().rss / 2**20, proc.num_fds()))
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
