"""The stand-in's "voice": a quiet tone streamed in fixed 100 ms chunks.

There is no speech synthesis; the client only needs well-formed PCM16 audio of the right length
so playback, interruption and truncation positions behave as with the real API.
"""

from __future__ import annotations

import math
from array import array

from .protocol import SAMPLE_RATE

CHUNK_MS = 100
SAMPLES_PER_CHUNK = SAMPLE_RATE * CHUNK_MS // 1000


def tone_chunk(amplitude: float) -> bytes:
    """100 ms of a 220 Hz sine (exactly 22 cycles, so chunks join without clicks)."""
    samples = SAMPLES_PER_CHUNK
    level = max(0.0, min(1.0, amplitude)) * 32767
    data = array("h", (int(level * math.sin(2 * math.pi * 220 * n / SAMPLE_RATE)) for n in range(samples)))
    return data.tobytes()
