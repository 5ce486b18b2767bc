"""The knobs one stand-in hands to every connection it serves.

They live apart from the connection so that the server (which owns and mutates them, e.g. a
test speeding up the pacing mid-run) and the connection (which reads them per response) share
one definition.
"""

from __future__ import annotations

from dataclasses import dataclass

from .policy import ResponsePolicy, TranscriptProvider


@dataclass
class ConnectionOptions:
    """Knobs shared by every connection of one stand-in (see :class:`RealtimeStandIn`)."""

    policy: ResponsePolicy
    transcripts: TranscriptProvider
    speed: float = 1.0
    """Pacing factor for streamed output: 1.0 is real time, 20.0 streams 20x faster."""
    ms_per_char: int = 60
    """Length of spoken audio per character of text (about 15 characters per second)."""
    tone_amplitude: float = 0.03
    """Level of the tone that stands in for speech (0 gives silence)."""
    vad_threshold: float = 0.02
    vad_start_ms: int = 60
    vad_stop_ms: int = 500
    server_interrupts: bool | None = None
    """Cancel the active response when speech starts. None follows the session's
    ``turn_detection.interrupt_response``, as the real API does."""
