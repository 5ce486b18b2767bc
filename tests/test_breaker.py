"""The circuit breaker's states, driven by a fake clock."""

from __future__ import annotations

import pytest

from agent.mcp.breaker import BreakerOptions, BreakerState, CircuitBreaker, CircuitOpen


def make() -> tuple[CircuitBreaker, list[float], list[BreakerState]]:
    now = [0.0]
    changes: list[BreakerState] = []
    b = CircuitBreaker(BreakerOptions(3, 30.0), clock=lambda: now[0], on_state_change=changes.append)
    return b, now, changes


def fail(b: CircuitBreaker, n: int) -> None:
    for _ in range(n):
        b.acquire()
        b.record_failure()


def test_three_consecutive_failures_open_it() -> None:
    b, _, changes = make()
    fail(b, 2)
    assert b.state is BreakerState.CLOSED
    fail(b, 1)
    assert b.state is BreakerState.OPEN
    assert changes == [BreakerState.OPEN]
    with pytest.raises(CircuitOpen):
        b.acquire()


def test_a_success_resets_the_count() -> None:
    b, _, _ = make()
    fail(b, 2)
    b.acquire()
    b.record_success()
    fail(b, 2)
    assert b.state is BreakerState.CLOSED


def test_half_open_allows_exactly_one_trial_and_closes_on_success() -> None:
    b, now, changes = make()
    fail(b, 3)
    now[0] = 29.9
    with pytest.raises(CircuitOpen):
        b.acquire()
    now[0] = 30.0
    assert b.state is BreakerState.HALF_OPEN
    b.acquire()  # the trial
    with pytest.raises(CircuitOpen):
        b.acquire()  # a second caller while the trial runs fails fast
    b.record_success()
    assert b.state is BreakerState.CLOSED
    assert changes == [BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.CLOSED]


def test_a_failed_trial_opens_it_again_for_a_full_timeout() -> None:
    b, now, _ = make()
    fail(b, 3)
    now[0] = 31.0
    b.acquire()
    b.record_failure()
    assert b.state is BreakerState.OPEN
    now[0] = 60.0
    assert b.state is BreakerState.OPEN
    now[0] = 61.0
    assert b.state is BreakerState.HALF_OPEN


def test_a_cancelled_trial_frees_the_slot() -> None:
    b, now, _ = make()
    fail(b, 3)
    now[0] = 30.0
    b.acquire()
    b.release()
    b.acquire()  # another trial may go
    b.record_success()
    assert b.state is BreakerState.CLOSED
