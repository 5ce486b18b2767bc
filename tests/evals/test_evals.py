"""Agent behaviour evals (marker `evals`; `make evals`).

Offline (the default, and inside `make test`) every scenario runs once with the well-behaved script, whose
checks must all hold, and once per scripted flaw, which the checks must name: the harness is tested
without a model. Live every scenario runs once against the real model, then the judge reads the answers
whose meaning matters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from livekit.agents.voice.run_result import ChatMessageEvent, RunResult

from tests.evals.behaviours import Flaw, ScriptedModel
from tests.evals.live import Judge, live_settings
from tests.evals.rig import EvalRig, conversation
from tests.evals.scenarios import SCENARIOS, Scenario

pytestmark = pytest.mark.evals

LIVE = live_settings()
# Live conversations, kept for the judge so each scenario costs the real model once.
_judged_turns: dict[str, RunResult[Any]] = {}

RecordRow = Callable[[str, str, str, bool, str], None]


def _behaviours() -> Iterator[Any]:
    for scenario in SCENARIOS:
        if LIVE is not None:
            yield pytest.param(scenario, None, id=f"{scenario.id}-live")
            continue
        yield pytest.param(scenario, None, id=f"{scenario.id}-good")
        for flaw in scenario.flaws:
            yield pytest.param(scenario, flaw, id=f"{scenario.id}-{flaw}")


async def _play(scenario: Scenario, flaw: Flaw | None) -> tuple[EvalRig, list[str]]:
    if LIVE is not None and scenario.slip is not None:
        pytest.skip("a citation slip is scripted: the real model cannot be made to slip on cue")
    model = LIVE if LIVE is not None else ScriptedModel(flaw, slip=scenario.slip)
    async with conversation(model, greet=scenario.greet, mcp_timeout_s=scenario.mcp_timeout_s) as rig:
        await scenario.play(rig)
        violations = list(dict.fromkeys(str(v) for v in scenario.check(rig)))
    if LIVE is not None:
        _judged_turns[scenario.id] = scenario.judged(rig)
    return rig, violations


@pytest.mark.parametrize(("scenario", "flaw"), list(_behaviours()))
async def test_rules(scenario: Scenario, flaw: Flaw | None, record_row: RecordRow) -> None:
    _, violations = await _play(scenario, flaw)
    behaviour = "live" if LIVE is not None else str(flaw or "good")
    if flaw is None:
        record_row(scenario.id, behaviour, "rules", not violations, "; ".join(violations) or "held")
        assert not violations, f"{scenario.title}: " + "; ".join(violations)
        return
    expected = scenario.flaws[flaw]
    caught = any(v.startswith(f"{expected}:") for v in violations)
    reason = f"flagged {expected}" if caught else f"missed {expected}; found: {'; '.join(violations) or 'nothing'}"
    record_row(scenario.id, behaviour, "rules", caught, reason)
    assert caught, f"the checker did not flag the {flaw} script ({scenario.title}): {reason}"


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s.id) for s in SCENARIOS if s.intent])
async def test_judge(scenario: Scenario, judge: Judge, record_row: RecordRow) -> None:
    assert scenario.intent is not None
    result = _judged_turns.get(scenario.id)
    if result is None:  # run alone (-k): play the conversation here
        rig, _ = await _play(scenario, None)
        result = scenario.judged(rig)
    answers = [i for i, e in enumerate(result.events) if isinstance(e, ChatMessageEvent) and e.item.role == "assistant"]
    assert answers, f"{scenario.title}: the agent said nothing to judge"
    try:
        verdict = await judge.judge(result.expect[answers[-1]].is_message(role="assistant"), scenario.intent)
    except Exception as exc:  # the judge itself failed (network, quota): say so in the table, then fail
        record_row(scenario.id, "live", "judge", False, f"judge error: {type(exc).__name__}")
        raise
    record_row(scenario.id, "live", "judge", verdict.passed, verdict.reason)
    assert verdict.passed, f"{scenario.title}: {verdict.reason}"
