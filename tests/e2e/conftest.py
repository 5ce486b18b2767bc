"""One real Lexvoz stack shared by the end-to-end modules that use its default form, on ports no local `make run`
uses; a module needing another form (a job limit, a fake search server) starts its own.

Why shared: starting livekit-server, the search server (index load and embedding warm-up), the stand-in, the
token service and the worker costs 25 s or more on a small machine, while every test gets its own room (and so
its own agent job and Realtime connection) anyway. The shared stack lives for this package only (`package`
scope), so no stack outlives the end-to-end tests.

What differs from `make run`, and why:
- the worker runs with `--dev`: a production worker binds its health port 8081 on every interface,
  which collides with a running local stack, and refuses jobs above 70 % CPU, which a 2-core machine
  reaches while the tests run;
- the search server waits `SEARCH_DELAY_MS` before every search (test-only knob), long enough to
  barge in on a running search;
- the stand-in paces its speech faster and turns every audio turn into `QUESTION`, so what a test
  says does not depend on which test spoke first.

The search index is built from `../shared/data/constitucion_panama.json` (beside the repository) in
the session's temporary data directory; a copy is kept in pytest's cache, keyed by the source and the
search code, so later runs skip the ~30 s build.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from agent.devstack import livekit_server
from agent.devstack.stack import Stack, StackOptions
from agent.settings import Settings
from agent.web.dispatch import LiveKitRooms
from panama_law.index import disk as law_index
from tests import constitution
from tests.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]

QUESTION = "¿Cuál es el idioma oficial de Panamá?"
SEARCH_DELAY_MS = 2500
STANDIN_SPEED = 8.0
LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class E2EStack:
    """The running stack plus what the tests need to know about how it was configured."""

    stack: Stack
    question: str
    search_delay_ms: int

    @property
    def log_dir(self) -> Path:
        return self.stack.opts.log_dir

    @property
    def search_log(self) -> Path:
        return self.log_dir / "search.log"

    async def new_session(self) -> dict[str, str]:
        """What the page does: ask the token service for a room, an identity and a token.

        The token carries an explicit dispatch of the agent by name, so joining the room is what
        brings the agent in.
        """
        url = f"{self.stack.web_url}api/session"
        async with aiohttp.ClientSession() as http, http.post(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            assert resp.status == 200, f"POST /api/session answered {resp.status}: {await resp.text()}"
            body = await resp.json()
        assert set(body) >= {"url", "token", "room", "identity"}, body
        return {k: str(body[k]) for k in ("url", "token", "room", "identity")}

    def log_tails(self) -> str:
        return log_tails(self.log_dir)


def log_tails(log_root: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The end of every child's log under `log_root`: what a failed end-to-end test needs to be read."""
    parts: list[str] = []
    for path in sorted(log_root.rglob("*.log")):
        try:
            tail = path.read_text(errors="replace").splitlines()[-lines:]
        except OSError as exc:
            tail = [f"(unreadable: {exc})"]
        parts.append(f"--- last {lines} lines of {path.relative_to(log_root)} ---\n" + "\n".join(tail))
    return "\n".join(parts) or "(no logs)"


def _bindable(port: int, kind: socket.SocketKind = socket.SOCK_STREAM) -> bool:
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def livekit_port(start: int = 17_890) -> int:
    """A port P with P and P+1 (RTC over TCP) free, and the UDP range livekit_server derives from P free.

    Two stacks only share UDP ports when their signalling ports agree modulo 50; checking the whole
    range avoids that too. Ports that share 7880's residue (the default local stack) are never picked.
    """
    for port in range(start, start + 500):
        if port % 50 == 7880 % 50:
            continue
        if (
            _bindable(port)
            and _bindable(port + 1)
            and all(_bindable(p, socket.SOCK_DGRAM) for p in livekit_server.media_ports(port))
        ):
            return port
    raise RuntimeError("no free port for livekit-server")


def _index_cache_key() -> str:
    """Source bytes plus the search package's code, in every stage, and data (the glosses): a change to any means a
    fresh build."""
    digest = hashlib.sha256(constitution.require().read_bytes())
    package = REPO_ROOT / "panama_law"
    for path in sorted([*package.rglob("*.py"), *(package / "data").glob("*")]):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _seed_index(config: pytest.Config, data_dir: Path) -> Path | None:
    """Copy a cached index into `data_dir` if one exists; returns where to save a fresh build, or None."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return None
    cached = Path(cache.mkdir("lexvoz-e2e-index")) / _index_cache_key() / law_index.index_path(data_dir).name
    if cached.is_file():
        shutil.copy2(cached, law_index.index_path(data_dir))
        return None
    return cached


def _save_index(data_dir: Path, cached: Path) -> None:
    built = law_index.index_path(data_dir)
    if not built.is_file():
        return
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.partial")
    shutil.copy2(built, partial)
    os.replace(partial, cached)  # atomic: a concurrent run never reads half a file


def require_livekit_server() -> None:
    """Skip, saying how to get it, when the livekit-server binary is neither built nor on PATH."""
    try:
        livekit_server.find_or_build(build=False, log=False)
    except livekit_server.LiveKitServerMissing as exc:
        pytest.skip(f"livekit-server not available (run `make livekit-server`): {exc}")


def running_stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    *,
    worker_env: dict[str, str] | None = None,
) -> Iterator[E2EStack]:
    """Start the stack for a test module and stop it after; `worker_env` adds worker settings (a job limit)."""
    source = constitution.require()
    require_livekit_server()

    base = tmp_path_factory.mktemp("lexvoz-e2e")
    data_dir = base / "data"
    log_dir = base / "log"
    data_dir.mkdir()
    save_to = _seed_index(request.config, data_dir)
    options = StackOptions(
        livekit_port=livekit_port(),
        search_port=free_port(),
        web_port=free_port(),
        standin_port=free_port(),
        rehearsal=True,
        source=source,
        data_dir=data_dir,
        log_dir=log_dir,
        ledger_path=base / "ledger.sqlite3",
        standin_args=["--speed", str(STANDIN_SPEED), "--fallback-transcript", QUESTION],
        worker_args=["--dev"],
        worker_env=dict(worker_env or {}),
        search_env={"PANAMA_LAW_TEST_DELAY_MS": str(SEARCH_DELAY_MS)},
    )
    stack = Stack(options)
    try:
        stack.start()
    except Exception as exc:  # Stack.start already stopped what it had started
        pytest.fail(f"the Lexvoz stack did not start: {exc}\n{log_tails(log_dir)}", pytrace=False)
    if save_to is not None:
        _save_index(data_dir, save_to)
    try:
        yield E2EStack(stack=stack, question=QUESTION, search_delay_ms=SEARCH_DELAY_MS)
    finally:
        stack.stop()


@pytest.fixture(scope="package")
def e2e_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2EStack]:
    """The default stack, started by the first test asking for it and stopped after the package's last test."""
    yield from running_stack(request, tmp_path_factory)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that used the stack shows the tail of every child's log next to the failure."""
    report = yield
    if report.failed:
        for running in {id(v): v for v in getattr(item, "funcargs", {}).values() if isinstance(v, E2EStack)}.values():
            report.sections.append(("lexvoz stack logs", running.log_tails()))
    return report


LIVEKIT_DOWN_S = 2.0  # as the soak's fault: livekit-server down this long, then started again


def take_livekit_down(stack: Stack, *, kill: bool, down_s: float = LIVEKIT_DOWN_S) -> None:
    """Stop livekit-server (SIGTERM: it tells its participants; or SIGKILL: it tells nobody), then start it again
    `down_s` later on the same port. Blocks: from a test's event loop, run it in a thread."""
    if kill:
        for child in [c for c in stack.children if c.name == "livekit-server"]:
            child.proc.kill()
            child.proc.wait(10)
            stack.children.remove(child)
    else:
        stack.stop_child("livekit-server")
    time.sleep(down_s)
    stack._start_livekit()


def livekit_rooms(stack: E2EStack) -> LiveKitRooms:
    """The page service's view of livekit-server's rooms, pointed at this stack (to check what a room holds)."""
    opts = stack.stack.opts
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        LIVEKIT_URL=stack.stack.livekit_url,
        LIVEKIT_API_KEY=opts.api_key,
        LIVEKIT_API_SECRET=opts.api_secret,
    )
    return LiveKitRooms(settings)
