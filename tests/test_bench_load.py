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
