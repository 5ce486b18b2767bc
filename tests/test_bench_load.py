"""The capacity benchmark's own arithmetic (`bench/load.py`): figures that compare runs must mean the same."""

from __future__ import annotations

import pytest

from bench.load import Outcome, conversation_minutes


def _outcome(heard_at: float | None, left_at: float | None = None) -> Outcome:
    out = Outcome(0)
    out.heard_at, out.left_at = heard_at, left_at
    return out


def test_conversation_minutes_count_only_the_time_an_agent_heard_each_person() -> None:
    # A run where people queue for a free agent: the minutes spent waiting are no conversation, or the worker's
    # CPU per conversation-minute comes out several times too cheap beside a run where everyone talks at once.
    people = [
        _outcome(heard_at=100.0, left_at=160.0),  # waited 100 s, talked 60 s, left
        _outcome(heard_at=10.0),  # stayed until the end of the window
        _outcome(heard_at=None, left_at=30.0),  # never got an agent
        _outcome(heard_at=50.0, left_at=900.0),  # counted up to the moment the CPU was read
    ]
    assert conversation_minutes(people, window_end=250.0) == pytest.approx((60 + 240 + 200) / 60)


def test_a_join_s_steps_are_percentiles_over_the_people_who_reached_each_step() -> None:
    from bench.load import join_steps

    people = []
    for i in range(1, 11):
        out = Outcome(i)
        out.join_steps = {"session": 0.1 * i, "in_room": 0.5 * i, "agent_joined": 1.0 * i}
        if i <= 4:  # only the first four got as far as the model's connection
            out.join_steps["model_connected"] = 2.0 * i
        people.append(out)
    people.append(Outcome(99))  # never heard: no steps at all
    figures = join_steps(people)
    assert list(figures) == ["session", "in_room", "agent_joined", "model_connected"]  # in the order of a join
    assert figures["agent_joined"] == {"p50_s": 5.0, "p95_s": 10.0}  # observed values (nearest rank)
    assert figures["model_connected"]["p95_s"] == 8.0  # over the four who reached it


# -- the bare baseline: order of the rounds, their combination, the ratios --------------------------------------


def test_rounds_alternate_lexvoz_and_bare_so_a_drift_of_the_host_falls_on_both() -> None:
    from bench.load import round_order

    assert round_order(3, baseline=True) == ["lexvoz", "bare", "lexvoz", "bare", "lexvoz", "bare"]
    assert round_order(2, baseline=False) == ["lexvoz", "lexvoz"]
    assert round_order(2, baseline=True, tool_baseline=True) == ["lexvoz", "bare", "bare_tool"] * 2
    assert round_order(1, baseline=False, tool_baseline=True) == ["lexvoz"]  # no baseline: none of either kind


def test_ratios_are_lexvoz_over_bare_for_worker_cpu_per_minute_and_rss_per_conversation() -> None:
    from bench.load import compare_with_bare

    lexvoz = {"cpu_s_per_session_minute": 6.6, "rss_mb_per_session": 330.0}
    bare = {"cpu_s_per_session_minute": 6.0, "rss_mb_per_session": 300.0}
    assert compare_with_bare(lexvoz, bare) == {"cpu_ratio_vs_bare": 1.1, "rss_ratio_vs_bare": 1.1}
    assert compare_with_bare(lexvoz, bare, "bare_tool") == {
        "cpu_ratio_vs_bare_tool": 1.1,
        "rss_ratio_vs_bare_tool": 1.1,
    }
    # A bare round that measured nothing gives no ratio rather than a division by zero or a flattering figure.
    assert compare_with_bare(lexvoz, {"cpu_s_per_session_minute": None, "rss_mb_per_session": 0.0}) == {
        "cpu_ratio_vs_bare": None,
        "rss_ratio_vs_bare": None,
    }


def _round(cpu: float, rss: float, completed: int, lost: int, errors: list[str]) -> dict[str, object]:
    return {
        "agent": "lexvoz",
        "sessions": 4,
        "got_agent": 4,
        "completed": completed,
        "answered": None,
        "evidence_lost": lost,
        "cpu_s_per_session_minute": cpu,
        "rss_mb_per_session": rss,
        "listen_p95_s": None,
        "answers_without_evidence": {"failed: timeout": 1} if lost else {},
        "errors": errors,
        "error_count": len(errors),
        "programs": {"worker": {"cpu_s": cpu}},
    }


def test_rounds_combine_as_medians_with_the_worst_people_count_and_every_loss_kept() -> None:
    from bench.load import combine_rounds

    runs = [_round(5.0, 300, 4, 0, []), _round(9.0, 310, 3, 1, ["TimeoutError: x"]), _round(6.0, 290, 4, 0, [])]
    combined = combine_rounds(runs)
    assert combined["cpu_s_per_session_minute"] == 6.0 and combined["rss_mb_per_session"] == 300
    assert combined["completed"] == 3  # one round left a person without evidence: the run says so
    assert combined["evidence_lost"] == 1 and combined["error_count"] == 1
    assert combined["errors"] == ["TimeoutError: x"]
    assert combined["answers_without_evidence"] == {"failed: timeout": 1}
    assert combined["answered"] is None and combined["listen_p95_s"] is None  # not measured stays not measured
    assert combined["rounds"] == 3


def test_one_round_combines_to_its_own_figures() -> None:
    from bench.load import combine_rounds

    one = _round(5.0, 300, 4, 0, [])
    combined = combine_rounds([one])
    assert {k: v for k, v in combined.items() if k != "rounds"} == one


# -- the bare agent itself -----------------------------------------------------------------------------------


@pytest.fixture
def bare_agent(monkeypatch: pytest.MonkeyPatch):
    import importlib

    from agent.settings import get_settings

    monkeypatch.setenv("LEXVOZ_REHEARSAL", "1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("LEXVOZ_MAX_JOBS", "3")
    monkeypatch.setenv("LEXVOZ_JOB_EXECUTOR", "thread")
    monkeypatch.setenv("LEXVOZ_IDLE_PROCESSES", "2")
    get_settings.cache_clear()
    import bench.bare_agent as module

    yield importlib.reload(module)
    get_settings.cache_clear()


def test_the_bare_agent_has_no_tool_and_lexvoz_s_model_options(bare_agent) -> None:
    from agent.settings import get_settings
    from agent.voice.conversation import build_realtime_model

    assert bare_agent.BareAgent().tools == []
    bare = bare_agent.build_model(bare_agent.options)
    assert type(bare).__name__ == "RealtimeModel"  # the plugin's own class, no Lexvoz subclass or listeners
    lexvoz = build_realtime_model(get_settings())
    for option in (
        "model",
        "voice",
        "turn_detection",
        "input_audio_transcription",
        "base_url",
        "api_key",
        "max_response_output_tokens",
        "modalities",
    ):
        assert getattr(bare._opts, option) == getattr(lexvoz._opts, option), option
    assert bare._opts.turn_detection.eagerness == "low" and bare._opts.input_audio_transcription.language == "es"


async def test_the_bare_agent_with_a_tool_answers_as_a_lexvoz_search_does_without_one(
    bare_agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool rounds of bench/latency.py hold Lexvoz's tool turns against the framework's own: the bare agent's
    tool must be the one the stand-in calls, and its answer a search's answer in shape and size, or the comparison
    would measure a cheaper turn than Lexvoz's."""
    import json

    from agent.contract import MAX_EXCERPT_CHARS, MAX_SOURCES, TOOL_NAME, Source
    from bench.load import worker_variant_env
    from realtime_standin.policy import NO_SOURCES_REPLY, render_sources

    assert bare_agent.build_agent().tools == []  # without the setting: no tool
    monkeypatch.setenv(bare_agent.TOOL_ENV, "1")
    agent = bare_agent.build_agent()
    assert [tool.info.name for tool in agent.tools] == [TOOL_NAME]
    answer = await agent.search("¿Qué dice la norma?")
    sources = [Source.model_validate(raw) for raw in json.loads(answer)["fuentes"]]  # Lexvoz's own bounds
    assert len(sources) == MAX_SOURCES and all(len(s.excerpt) == MAX_EXCERPT_CHARS for s in sources)
    read_back = render_sources(answer)  # the stand-in reads the sources back, as for Lexvoz's
    assert read_back != NO_SOURCES_REPLY and all(source.citation in read_back for source in sources)
    assert worker_variant_env("bare_tool") == {bare_agent.TOOL_ENV: "1"}
    assert worker_variant_env("bare") == {} and worker_variant_env("lexvoz") == {}


def test_the_bare_worker_runs_jobs_like_the_lexvoz_worker_of_the_run(bare_agent) -> None:
    from livekit.agents import JobExecutorType

    assert bare_agent.options.agent_name == "lexvoz"  # the page service's token dispatches it by this name
    assert bare_agent.server._job_executor_type == JobExecutorType.THREAD
    assert bare_agent.server._num_idle_processes == 2
    assert bare_agent.admission.max_jobs == 3


async def test_the_bare_worker_admits_rooms_up_to_the_job_limit_and_refuses_the_next(bare_agent) -> None:
    running = 0
    admission = bare_agent.CountingAdmission(2, lambda: running)

    class Request:
        def __init__(self) -> None:
            self.answer: str | None = None

        async def accept(self) -> None:
            nonlocal running
            self.answer = "accepted"
            running += 1

        async def reject(self) -> None:
            self.answer = "rejected"

    requests = [Request() for _ in range(3)]
    for request in requests:
        await admission(request)
    assert [r.answer for r in requests] == ["accepted", "accepted", "rejected"]


def test_the_bare_agent_carries_none_of_lexvoz_s_conversation_code() -> None:
    # No gateway, observers, ledger, metrics or tracing in the baseline's processes: importing it pulls in the
    # settings and nothing else of the product.
    import ast
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = "import bench.bare_agent, sys; print(sorted(m for m in sys.modules if m.split('.')[0] == 'agent'))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        env={**os.environ, "LEXVOZ_REHEARSAL": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    imported = ast.literal_eval(done.stdout.strip())
    assert "agent.settings" in imported
    assert [m for m in imported if m.startswith(("agent.voice", "agent.mcp", "agent.ops", "agent.worker"))] == []
