"""The worker's capacity knobs: executor, warm runners, the load threshold, local VAD, transcript sync."""

from __future__ import annotations

import importlib
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


@pytest.mark.parametrize("max_jobs", [1, 2, 8, 25, 40])
def test_the_worker_is_full_exactly_at_its_job_limit(reload_worker: Any, max_jobs: int) -> None:
    worker = reload_worker(LEXVOZ_MAX_JOBS=str(max_jobs))
    threshold = worker.load_threshold(max_jobs)
    assert threshold < 1.0  # livekit-agents warns above 1 in production

    def load(jobs: int) -> float:
        return float(worker.job_load(SimpleNamespace(active_jobs=[object()] * jobs)))

    assert load(max_jobs - 1) < threshold <= load(max_jobs)
    assert worker.server._load_threshold.prod_default == threshold  # development mode keeps no limit


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
