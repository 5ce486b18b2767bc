"""Energy-based voice activity detection on PCM16 24 kHz mono audio.

The real service runs a neural VAD (or a semantic turn model); tests only need deterministic
turn boundaries from synthetic audio, so RMS energy over 20 ms frames is enough: speech starts
once ``start_ms`` of consecutive voiced audio has been seen and stops after ``stop_ms`` of
consecutive silence. Timestamps are in milliseconds of audio written since the session started,
the time base the real ``speech_started.audio_start_ms`` uses.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Literal

SAMPLE_RATE = 24_000


@dataclass(frozen=True)
class VadEvent:
    kind: Literal["start", "stop"]
    at_ms: int
    """start: where voiced audio began; stop: where the trailing silence began."""


def rms(pcm16: bytes) -> float:
    """Root-mean-square level of little-endian PCM16 audio, normalized to 0..1."""
    if len(pcm16) < 2:
        return 0.0
    samples = array("h")
    samples.frombytes(pcm16[: len(pcm16) - len(pcm16) % 2])
    total = sum(s * s for s in samples)
    return math.sqrt(total / len(samples)) / 32768.0


class EnergyVad:
    """Streaming VAD: feed arbitrary-sized chunks, get start/stop events in order."""

    def __init__(
        self,
        *,
        threshold: float = 0.02,
        start_ms: int = 60,
        stop_ms: int = 500,
        frame_ms: int = 20,
        sample_rate: int = SAMPLE_RATE,
    ) -> None:
        self.threshold = threshold
        self.start_ms = start_ms
        self.stop_ms = stop_ms
        self.frame_ms = frame_ms
        self._frame_bytes = sample_rate * frame_ms // 1000 * 2
        self._pending = b""
        self._processed_ms = 0
        self._voiced_run_ms = 0
        self._voiced_run_start_ms = 0
        self._silent_run_ms = 0
        self._silent_run_start_ms = 0
        self.speaking = False

    @property
    def processed_ms(self) -> int:
        return self._processed_ms

    def reset(self) -> None:
        """Forget the current turn (buffer cleared or committed by hand); the clock keeps running."""
        self._voiced_run_ms = 0
        self._silent_run_ms = 0
        self.speaking = False

    def process(self, pcm16: bytes) -> list[VadEvent]:
        data = self._pending + pcm16
        events: list[VadEvent] = []
        offset = 0
        while len(data) - offset >= self._frame_bytes:
            frame = data[offset : offset + self._frame_bytes]
            offset += self._frame_bytes
            event = self._process_frame(rms(frame) >= self.threshold)
            if event is not None:
                events.append(event)
        self._pending = data[offset:]
        return events

    def _process_frame(self, voiced: bool) -> VadEvent | None:
        frame_start = self._processed_ms
        self._processed_ms += self.frame_ms
        if voiced:
            if self._voiced_run_ms == 0:
                self._voiced_run_start_ms = frame_start
            self._voiced_run_ms += self.frame_ms
            self._silent_run_ms = 0
            if not self.speaking and self._voiced_run_ms >= self.start_ms:
                self.speaking = True
                return VadEvent("start", self._voiced_run_start_ms)
            return None
        self._voiced_run_ms = 0
        if not self.speaking:
            return None
        if self._silent_run_ms == 0:
            self._silent_run_start_ms = frame_start
        self._silent_run_ms += self.frame_ms
        if self._silent_run_ms >= self.stop_ms:
            self.speaking = False
            self._silent_run_ms = 0
            return VadEvent("stop", self._silent_run_start_ms)
        return None
