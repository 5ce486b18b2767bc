"""The programs the soak runs, restarts and watches: the stack in rehearsal mode, two workers, PostgreSQL for the
ledger, and toxiproxy in front of the search server.

With `cluster`, it runs the scaled-out form ([deploy.md](../../docs/deploy.md#scaling-out-a-livekit-server-cluster)):
Redis, a second livekit-server node sharing it, and each worker registered through its own node; people join
through the first node, the one the livekit-server fault restarts.

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

from agent.devstack import livekit_server
from agent.devstack.processes import terminate, wait_for_text
from agent.devstack.stack import Stack, StackOptions
from bench.soak.toxiproxy import Toxiproxy
from tests import constitution, redis_server
from tests.e2e.conftest import livekit_port
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

    def __init__(
        self, base: Path, *, conversations: int, speed: float, workers: int = 2, cluster: bool = False
    ) -> None:
        self.base = base
        self.cluster = cluster
        self.redis: subprocess.Popen[bytes] | None = None
        self.node_b: subprocess.Popen[bytes] | None = None
        self.node_b_url = ""
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
        self.redis_port = free_port() if cluster else 0  # chosen now: livekit-server's options name it
        redis_args = ["--redis-host", f"127.0.0.1:{self.redis_port}"] if cluster else []
        self.options = StackOptions(
            livekit_args=redis_args,
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
        cluster = ["livekit-server-b", "redis"] if self.cluster else []
        return fixed + cluster + [f"worker-{n}" for n in range(1, self.worker_count + 1)]

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
        if self.cluster:
            (self.base / "redis").mkdir(exist_ok=True)
            self.redis, _ = redis_server.start_redis(self.base / "redis", self.log_dir / "redis.log", self.redis_port)
        self.stack.start()
        if self.cluster:
            port_b = livekit_port(start=self.options.livekit_port + 1)
            self.node_b = livekit_server.start(
                api_key=self.options.api_key,
                api_secret=self.options.api_secret,
                port=port_b,
                log_path=self.log_dir / "livekit-server-b.log",
                extra_args=self.options.livekit_args,
            )
            self.node_b_url = f"ws://127.0.0.1:{port_b}"
        self.toxi.create(SEARCH_PROXY, self.proxy_port, self.options.search_port)
        if not self._index_seeded:
            from bench.load import _save_index

            _save_index(self.options.data_dir, self._index_cached)
        for n in range(1, self.worker_count + 1):
            self.start_worker(f"worker-{n}")

    def node_of(self, name: str) -> str:
        """The livekit-server node a worker registers through: on a cluster, every other worker uses node B."""
        second = self.cluster and int(name.rsplit("-", 1)[1]) % 2 == 0
        return self.node_b_url if second else self.stack.livekit_url

    def start_worker(self, name: str) -> None:
        env = {**self.stack.common_env(), **self.options.worker_env, "LIVEKIT_URL": self.node_of(name)}
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
        child = self.stack.child("search")
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
        if self.node_b is not None:
            terminate(self.node_b, term_twice=True)
        self.stack.stop()
        if self.redis is not None:
            terminate(self.redis)
        self.toxi.stop()
        self.pg.cleanup()

    # -- watching -------------------------------------------------------------------------------

    def pid_of(self, name: str) -> int | None:
        if name in self.workers:
            return self.workers[name].pid
        if name == "toxiproxy":
            return self.toxi.proc.pid if self.toxi.proc else None
        cluster_part = {"livekit-server-b": self.node_b, "redis": self.redis}
        if name in cluster_part:
            proc = cluster_part[name]
            return proc.pid if proc is not None else None
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
