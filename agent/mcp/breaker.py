"""A small circuit breaker with an injectable clock.

Why not a library: the maintained async breakers either pull in a storage layer we do not need or do
not expose the half-open state that our gauge and our "one trial call" rule depend on. This class is
the whole rule, in one place, with tests that drive its clock.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass


class BreakerState(enum.IntEnum):
    """Values match the `voice_mcp_circuit_breaker_state` gauge."""

    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


@dataclass(frozen=True, slots=True)
class BreakerOptions:
    failure_threshold: int = 3
    reset_timeout_s: float = 30.0


class CircuitOpen(Exception):
    """Raised instead of calling while the breaker is open (or its one trial call is in flight)."""


class CircuitBreaker:
    """Opens after N consecutive failures; after the reset timeout lets exactly one trial call through."""

    def __init__(
        self,
        options: BreakerOptions | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_state_change: Callable[[BreakerState], None] | None = None,
    ) -> None:
        self._opts = options or BreakerOptions()
        self._clock = clock
        self._on_change = on_state_change
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._trial_in_flight = False

    @property
    def state(self) -> BreakerState:
        if self._state is BreakerState.OPEN and self._clock() - self._opened_at >= self._opts.reset_timeout_s:
            return BreakerState.HALF_OPEN
        return self._state

    def acquire(self) -> None:
        """Call before an attempt; raises CircuitOpen when the call must fail fast."""
        state = self.state
        if state is BreakerState.CLOSED:
            return
        if state is BreakerState.HALF_OPEN and not self._trial_in_flight:
            self._set(BreakerState.HALF_OPEN)
            self._trial_in_flight = True
            return
        raise CircuitOpen()

    def record_success(self) -> None:
        self._failures = 0
        self._trial_in_flight = False
        self._set(BreakerState.CLOSED)

    def record_failure(self) -> None:
        self._trial_in_flight = False
        if self._state is BreakerState.HALF_OPEN:
            self._open()
            return
        self._failures += 1
        if self._failures >= self._opts.failure_threshold:
            self._open()

    def release(self) -> None:
        """The attempt ended with neither verdict (cancelled): free the trial slot, keep the state."""
        self._trial_in_flight = False

    def _open(self) -> None:
        self._opened_at = self._clock()
        self._failures = 0
        self._set(BreakerState.OPEN)

    def _set(self, state: BreakerState) -> None:
        if state is not self._state:
            self._state = state
            if self._on_change is not None:
                self._on_change(state)
