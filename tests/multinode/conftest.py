"""A two-node LiveKit cluster with two Lexvoz workers, started once for the whole `multinode` suite.

The topology a scaled-out deployment uses (README, Deploy): Redis (Debian's `redis-server`, started here
on a free loopback port with a throwaway directory, never a system service), two livekit-server nodes
that share it, and two workers, each registered through a different node. The search server and the
Realtime stand-in are shared, as they would be behind their own addresses. Each person gets a token the
way the page service mints it, for a fresh room, and joins through the node the test picks.

Starting livekit-server, the search server and two workers costs tens of seconds on a small machine,
so the suite shares one cluster; the test that stops a worker runs last.

The cluster's logs (both livekit-server nodes, both workers, redis, the search server and the stand-in)
go to a temporary folder, or to `LEXVOZ_MULTINODE_LOG_DIR` when it is set, so a script running the suite
again and again keeps each run's logs; a failed test also appends where it failed (step, room, worker;
see `waits.py`) to `failures.jsonl` there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _pytest.reports import TestReport

from agent.devstack import livekit_server
from agent.devstack.processes import terminate, wait_for_text
from agent.devstack.stack import Stack, StackOptions
from agent.settings import Settings
from agent.web.tokens import mint_token, new_identity, new_room_name
from tests import constitution, redis_server
from tests.e2e.conftest import _save_index, _seed_index, livekit_port, log_tails, require_livekit_server
from tests.ports import free_port

from .waits import StepFailed, Where, Witness, failure_record

SPOKEN_QUESTION = "¿Cuál es el idioma oficial de Panamá?"
WORKER_START_S = 90.0
LOG_DIR_ENV = "LEXVOZ_MULTINODE_LOG_DIR"
FAILURES_FILE = "failures.jsonl"
LOG_DIR_KEY = pytest.StashKey[Path]()


@dataclass
class Worker:
    name: str
    node_url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def rooms(self) -> set[str]:
        """Rooms this worker received a job for, from its own log (one JSON object per line)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return {
            line.split('"room": "', 1)[1].split('"', 1)[0]
            for line in text.splitlines()
            if '"received job request"' in line and '"room": "' in line
        }

    def kill(self) -> None:
        """Stop the worker and its job runners at once, as a crashed host would."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.proc.wait(10)


@dataclass
class Cluster:
    stack: Stack
    node_urls: list[str]
    workers: list[Worker] = field(default_factory=list)
    nodes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    settings: Settings | None = None

    def session(self, node: int) -> dict[str, str]:
        """What `POST /api/session` answers, for a fresh room, joined through node `node`."""
        assert self.settings is not None
        room, identity = new_room_name(), new_identity()
        token = mint_token(self.settings, room=room, identity=identity)
        return {"url": self.node_urls[node], "token": token, "room": room, "identity": identity}

    def worker_for(self, room: str) -> Worker | None:
        return next((w for w in self.workers if room in w.rooms()), None)

    @property
    def witness(self) -> Witness:
        """Waits and checks whose failures name the step, the room and the worker, with its log's tail."""

        def held_by(room: str) -> str | None:
            worker = self.worker_for(room)
            return worker.name if worker else None

        return Witness({w.name: w.log for w in self.workers}, held_by)


def start_redis(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    if (why := redis_server.why_unavailable()) is not None:
        pytest.skip(why)
    return redis_server.start_redis(data_dir, log)


def start_worker(stack: Stack, name: str, node_url: str, ledger_dir: Path) -> Worker:
    log = stack.opts.log_dir / f"{name}.log"
    # One warm job process each, started one worker at a time: on two cores, several job processes importing
    # at once miss livekit-agents' 10 s start-up deadline and the worker then has no runner for the rooms.
    env = {
        **stack.common_env(),
        "LIVEKIT_URL": node_url,
        "LEXVOZ_LEDGER_PATH": str(ledger_dir / f"{name}.db"),
        "LEXVOZ_IDLE_PROCESSES": "1",
    }
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent", "start"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    worker = Worker(name, node_url, proc, log)
    witness = Witness({name: log}, lambda _room: name)
    for needle, step in (
        ("registered worker", f"starting {name}: waiting for it to register through {node_url}"),
        ("process initialized", f"starting {name}: waiting for its warm job process"),
    ):
        try:
            wait_for_text(log, needle, proc, timeout=WORKER_START_S)
        except (RuntimeError, TimeoutError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise witness.failure(step, "", first) from exc
    return worker


def log_dir_for(base: Path) -> Path:
    """Where the cluster's logs go: `LEXVOZ_MULTINODE_LOG_DIR` when set (kept after the run), else `base`."""
    chosen = os.environ.get(LOG_DIR_ENV, "").strip()
    path = Path(chosen) if chosen else base / "log"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    source = constitution.require()
    require_livekit_server()
    base = tmp_path_factory.mktemp("lexvoz-multinode")
    data_dir, redis_dir, ledger_dir = base / "data", base / "redis", base / "ledgers"
    for d in (data_dir, redis_dir, ledger_dir):
        d.mkdir()
    log_dir = log_dir_for(base)
    request.config.stash[LOG_DIR_KEY] = log_dir
    save_to = _seed_index(request.config, data_dir)
    try:
        redis, redis_port = start_redis(redis_dir, log_dir / "redis.log")
    except RuntimeError as exc:
        where = Where(step="starting redis-server", room="", worker="")
        raise StepFailed(where, str(exc), log_tails(log_dir)) from exc
    redis_args = ["--redis-host", f"127.0.0.1:{redis_port}"]
    stack = Stack(
        StackOptions(
            livekit_port=livekit_port(),
            search_port=free_port(),
            web_port=free_port(),
            standin_port=free_port(),
            rehearsal=True,
            source=source,
            data_dir=data_dir,
            log_dir=log_dir,
            standin_args=["--speed", "8", "--fallback-transcript", SPOKEN_QUESTION],
            livekit_args=redis_args,
            start_web=False,
            start_worker=False,
        )
    )
    running = Cluster(stack=stack, node_urls=[stack.livekit_url])
    try:
        stack.start()
        if save_to is not None:
            _save_index(data_dir, save_to)
        port_b = livekit_port(start=stack.opts.livekit_port + 1)
        running.nodes.append(
            livekit_server.start(
                api_key=stack.opts.api_key,
                api_secret=stack.opts.api_secret,
                port=port_b,
                log_path=log_dir / "livekit-server-b.log",
                extra_args=redis_args,
            )
        )
        running.node_urls.append(f"ws://127.0.0.1:{port_b}")
        running.settings = Settings(
            LIVEKIT_URL=stack.livekit_url,
            LIVEKIT_API_KEY=stack.opts.api_key,
            LIVEKIT_API_SECRET=stack.opts.api_secret,
            LEXVOZ_AGENT_NAME=stack.opts.agent_name,
        )
        for i, url in enumerate(running.node_urls):
            running.workers.append(start_worker(stack, f"worker-{'ab'[i]}", url, ledger_dir))
    except StepFailed:
        _stop(running, redis)
        raise
    except Exception as exc:
        _stop(running, redis)
        where = Where(step="starting livekit-server nodes, the search server and the stand-in", room="", worker="")
        raise StepFailed(where, f"{type(exc).__name__}: {exc}", log_tails(log_dir)) from exc
    try:
        yield running
    finally:
        _stop(running, redis)


def _stop(cluster: Cluster, redis: subprocess.Popen[bytes]) -> None:
    for worker in cluster.workers:
        terminate(worker.proc)
    for node in cluster.nodes:
        terminate(node, term_twice=True)
    cluster.stack.stop()
    terminate(redis)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, TestReport, TestReport]:
    """A failed test of the suite appends where it failed to `failures.jsonl` beside the cluster's logs."""
    report = yield
    log_dir = item.config.stash.get(LOG_DIR_KEY, None)
    if report.failed and log_dir is not None and call.excinfo is not None:
        record = failure_record(item.nodeid, report.when, call.excinfo.value)
        with open(log_dir / FAILURES_FILE, "a", encoding="utf-8") as out:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return report
