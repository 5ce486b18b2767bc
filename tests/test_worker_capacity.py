"""The worker's capacity knobs: executor, warm runners, the load threshold, local VAD, transcript sync."""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from livekit.agents import JobExecutorType

from agent.settings import Settings, get_settings
from agent.voice.conversation import build_conversation
from tests.job_double import mocked_room


@pytest.fixture
def reload_worker(monkeypatch: pytest.MonkeyPatch) -> Any:
    def load(**env: str) -> Any:
        monkeypatch.setenv("LEXVOZ_REHEARSAL", "1")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        import agent.worker as module

        return importlib.reload(module)

    yield load
    get_settings.cache_clear()


class _Request:
    """A job request as livekit-agents hands it to `on_request`: accept() returns once the job runs."""

    def __init__(self, started: asyncio.Event) -> None:
        self.answer: str | None = None
        self._started = started

    async def accept(self) -> None:
        self.answer = "accepted"
        await self._started.wait()  # assignment and a runner still to come

    async def reject(self) -> None:
        self.answer = "rejected"


@pytest.mark.parametrize("max_jobs", [1, 2, 8, 25])
async def test_a_burst_of_rooms_is_admitted_up_to_the_job_limit_only(reload_worker: Any, max_jobs: int) -> None:
    worker = reload_worker(LEXVOZ_MAX_JOBS=str(max_jobs))
    running: list[object] = []
    admission = worker.JobAdmission(max_jobs, lambda: len(running))
    started = asyncio.Event()
    burst = [_Request(started) for _ in range(max_jobs + 3)]  # all arrive before any job has started

    tasks = [asyncio.create_task(admission(r)) for r in burst]
    await asyncio.sleep(0)
    assert [r.answer for r in burst].count("accepted") == max_jobs
    assert [r.answer for r in burst].count("rejected") == 3
    running.extend(range(max_jobs))  # the accepted jobs now run
    started.set()
    await asyncio.gather(*tasks)
    assert admission.in_use == max_jobs

    assigned = asyncio.Event()
    assigned.set()  # the burst is over: a job accepted now is assigned at once
    late = _Request(assigned)
    await admission(late)
    assert late.answer == "rejected"
    running.pop()  # a conversation ended: its slot is free again
    await admission(late)
    assert late.answer == "accepted"


async def test_a_job_that_never_starts_gives_its_slot_back(reload_worker: Any) -> None:
    worker = reload_worker(LEXVOZ_MAX_JOBS="1")
    admission = worker.JobAdmission(1, lambda: 0)

    class _Unassigned(_Request):
        async def accept(self) -> None:
            raise TimeoutError("no assignment")  # what livekit-agents raises when the server never assigns

    with pytest.raises(TimeoutError):
        await admission(_Unassigned(asyncio.Event()))
    assert admission.in_use == 0


def test_the_framework_gate_does_not_refuse_a_burst(reload_worker: Any) -> None:
    # livekit-agents, with a finite threshold and no job running yet, counts each accepted job as
    # threshold / warm runners and refuses the rest of a burst; the job limit is JobAdmission's alone.
    worker = reload_worker(LEXVOZ_MAX_JOBS="10", LEXVOZ_IDLE_PROCESSES="1")
    assert worker.executor_options(worker.settings)["load_threshold"] == math.inf
    assert worker.server._load_threshold == math.inf
    assert worker.server._request_fnc is worker.admission


def test_executor_and_warm_runners_come_from_settings(reload_worker: Any) -> None:
    worker = reload_worker(LEXVOZ_JOB_EXECUTOR="thread", LEXVOZ_IDLE_PROCESSES="3", LEXVOZ_MAX_JOBS="20")
    options = worker.executor_options(worker.settings)
    assert options["job_executor_type"] is JobExecutorType.THREAD
    assert options["num_idle_processes"] == 3
    assert worker.server._job_executor_type is JobExecutorType.THREAD
    assert worker.server._num_idle_processes == 3

    worker = reload_worker(LEXVOZ_JOB_EXECUTOR="process", LEXVOZ_IDLE_PROCESSES="")
    options = worker.executor_options(worker.settings)
    assert options["job_executor_type"] is JobExecutorType.PROCESS
    assert "num_idle_processes" not in options  # the framework's own default


def test_a_bad_executor_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.settings import SettingsError

    monkeypatch.setenv("LEXVOZ_JOB_EXECUTOR", "fork")
    get_settings.cache_clear()
    try:
        with pytest.raises(SettingsError, match="LEXVOZ_JOB_EXECUTOR"):
            get_settings()
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize(("local_vad", "loads"), [("0", False), ("1", True)])
def test_prewarm_loads_silero_only_with_local_vad(reload_worker: Any, local_vad: str, loads: bool) -> None:
    worker = reload_worker(LEXVOZ_LOCAL_VAD=local_vad)
    proc = SimpleNamespace(userdata={})
    worker.prewarm(proc)
    assert ("vad" in proc.userdata) is loads


async def test_without_a_local_vad_the_realtime_model_detects_turns() -> None:
    settings = Settings(LEXVOZ_REHEARSAL=True, LEXVOZ_SYNC_TRANSCRIPTS=False)
    conversation = build_conversation(mocked_room(), settings, gateway=object(), vad=None)  # type: ignore[arg-type]
    assert conversation.session.vad is None
    assert conversation.session.turn_detection == "realtime_llm"
    text_output = conversation.room_options.text_output
    assert text_output.sync_transcription is False  # type: ignore[union-attr]


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_job_ending_leaves_the_other_conversations_tracing_and_gauges(
    reload_worker: Any, monkeypatch: pytest.MonkeyPatch, executor: str
) -> None:
    worker = reload_worker(LEXVOZ_JOB_EXECUTOR=executor)
    settings = Settings(LEXVOZ_JOB_EXECUTOR=executor, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318")
    released: list[bool] = []
    stopped: list[object] = []
    monkeypatch.setattr(worker.metrics, "release_process_gauges", lambda: released.append(True))
    monkeypatch.setattr(worker, "shutdown_tracing", stopped.append)
    first, second = worker.job_tracing(settings), worker.job_tracing(settings)
    assert first is not None and second is not None
    try:
        worker.end_job_observability(first, settings)
        if executor == "thread":  # one provider for the process; still running for the second job
            assert first is second
            assert stopped == [] and released == []
        else:  # the job process owns its provider and its gauges
            assert first is not second
            assert stopped == [first] and released == [True]
    finally:
        for provider in {id(first): first, id(second): second}.values():
            provider.shutdown()


def _run(script: str, **env: str) -> str:
    full_env = {**os.environ, "LEXVOZ_REHEARSAL": "1", **env}
    out = subprocess.run([sys.executable, "-c", script], env=full_env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def _worker_imports(**env: str) -> tuple[list[str], bool]:
    """What the worker process holds once `agent.worker` is imported (as `livekit.agents start` does): the plugins
    it registered, which livekit-agents' forkserver preloads into every job process, and whether onnxruntime
    came with them."""
    out = _run(
        "import sys, json\n"
        "import agent.worker\n"
        "from livekit.agents import Plugin\n"
        "print(json.dumps([[p.package for p in Plugin.registered_plugins], 'onnxruntime' in sys.modules]))\n",
        **env,
    )
    plugins, onnx = json.loads(out)
    return plugins, onnx


def _after_preload(worker: Any, then: str) -> str:
    """What `then` prints in a fresh interpreter that has imported what the forkserver preloads, and no more: the
    plugins the worker registered, then the worker's own preload list."""
    plugins, _ = _worker_imports()
    script = (
        "import importlib, sys, threading\n"
        f"for name in {plugins + worker.PRELOAD_MODULES!r}: importlib.import_module(name)\n"
    ) + then
    return _run(script)


@pytest.mark.parametrize(("local_vad", "carried"), [("0", False), ("1", True)])
def test_silero_and_onnxruntime_are_in_the_worker_only_with_local_vad(local_vad: str, carried: bool) -> None:
    # Local VAD is off by default. Imported anyway, Silero brought onnxruntime into the worker, and, as a registered
    # plugin, into its forkserver and every job process: about 19 MB of RSS each, for nothing.
    plugins, onnx = _worker_imports(LEXVOZ_LOCAL_VAD=local_vad)
    assert ("livekit.plugins.silero" in plugins) is carried
    assert onnx is carried
    assert "livekit.plugins.openai" in plugins


def test_the_forkserver_builds_the_realtime_event_models_so_job_processes_do_not(reload_worker: Any) -> None:
    # openai's models build their validators on first use; built before the fork, no job pays for them again.
    pending = _after_preload(
        reload_worker(),
        "import inspect, pkgutil, pydantic\n"
        "import openai.types.realtime as rt\n"
        "pending = []\n"
        "for info in pkgutil.iter_modules(rt.__path__, rt.__name__ + '.'):\n"
        "    module = importlib.import_module(info.name)\n"
        "    pending += [n for n, v in vars(module).items() if inspect.isclass(v)\n"
        "                and issubclass(v, pydantic.BaseModel) and v.__module__ == module.__name__\n"
        "                and not v.__pydantic_complete__]\n"
        "print(len(pending), pending[:5])\n",
    )
    assert pending == "0 []"


def test_the_forkserver_builds_what_each_job_built_before_its_person_was_heard(reload_worker: Any) -> None:
    # py-spy between a job request and the agent listening: the TLS contexts of the MCP client and of the
    # Realtime connection's http session (a whole CA bundle parsed each), the transcript pacing's hyphenation
    # patterns, livekit's chat message model. Built before the fork,
    # no job process builds them again.
    out = _after_preload(
        reload_worker(),
        "import ssl\n"
        "built = []\n"
        "def recording(cls, name):\n"
        "    real = getattr(cls, name)\n"
        "    setattr(cls, name, lambda *a, **k: (built.append(name), real(*a, **k))[1])\n"
        "for name in ('load_verify_locations', 'load_default_certs', 'set_default_verify_paths'):\n"
        "    recording(ssl.SSLContext, name)\n"
        "from livekit.agents import llm, tokenize\n"
        "from livekit.agents.tokenize import _basic_hyphenator\n"
        "recording(_basic_hyphenator.Hyphenator, '__init__')\n"
        "from agent.mcp.transport import GatewayTransport\n"
        "GatewayTransport(max_reply_bytes=1_000)\n"
        "from livekit.agents.utils import http_context\n"
        "async def realtime_http_session():\n"
        "    async with http_context.open():\n"
        "        http_context.http_session()\n"
        "import asyncio\n"
        "asyncio.run(realtime_http_session())\n"
        "tokenize.basic.hyphenate_word('artículo')\n"
        "print(built, llm.ChatMessage.__pydantic_complete__)\n",
    )
    assert out == "[] True"


def test_a_job_process_imports_nothing_the_forkserver_has_not_already_imported(reload_worker: Any) -> None:
    # Job processes fork from livekit-agents' forkserver; what they import themselves is paid again by every
    # job while its room waits (seconds each on two cores). Preloading must also stay fork-safe: no threads.
    worker = reload_worker()
    assert worker.server._preload_modules == worker.PRELOAD_MODULES
    imported = _after_preload(
        worker,
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "before = set(sys.modules)\n"
        "import agent.worker\n"
        "print(sorted(set(sys.modules) - before))\n",
    )
    assert imported == "['agent.worker']"


def test_a_job_process_carries_neither_sqlalchemy_nor_a_ledger_connection(reload_worker: Any) -> None:
    # A job's ledger entries go to the host's spool; the worker process alone opens the store. A job process that
    # imported SQLAlchemy carried ~10 MB more (and, on PostgreSQL, a connection of its own per conversation).
    out = _after_preload(
        reload_worker(),
        "import agent.worker\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'psycopg')))\n",
    )
    assert out == "[]"
