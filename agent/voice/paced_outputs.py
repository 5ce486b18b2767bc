"""The pacer's two links in the session's output chain: the audio it times and the text it holds back.

Each forwards everything to the next output unchanged and tells its `TranscriptPacer` what passed (frame
durations, flushes, clears, pauses, playback start and finish); the pacer decides when words are released.
Kept apart from the pacer so that the pacer's timing logic reads without the chain's plumbing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from livekit import rtc
from livekit.agents.voice.io import AudioOutput, AudioOutputCapabilities, TextOutput

if TYPE_CHECKING:
    from agent.voice.pacing import TranscriptPacer


class PacedAudio(AudioOutput):
    def __init__(self, pacer: TranscriptPacer, next_in_chain: AudioOutput) -> None:
        super().__init__(
            label="LexvozPacer", capabilities=AudioOutputCapabilities(pause=True), next_in_chain=next_in_chain
        )
        self._pacer = pacer
        # Segments whose playback_finished this wrapper passed on: with the framework's public count of the
        # segments captured, what is still playing, without reading the base class's private counter.
        self._finished = 0

    @property
    def sample_rate(self) -> int | None:
        return self.next_in_chain.sample_rate if self.next_in_chain else self._sample_rate

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        self._pacer._on_frame(frame.duration)
        if self.next_in_chain:
            await self.next_in_chain.capture_frame(frame)

    def flush(self) -> None:
        super().flush()
        if self.next_in_chain:
            self.next_in_chain.flush()
        self._pacer._on_audio_flush()

    def clear_buffer(self) -> None:
        self._pacer._on_clear()
        if self.next_in_chain:
            self.next_in_chain.clear_buffer()

    def pause(self) -> None:
        super().pause()
        self._pacer._on_pause()

    def resume(self) -> None:
        super().resume()
        self._pacer._on_resume()

    def on_playback_started(self, *, created_at: float) -> None:
        self._pacer._on_playback_started(created_at)
        super().on_playback_started(created_at=created_at)

    def on_playback_finished(
        self, *, playback_position: float, interrupted: bool, synchronized_transcript: str | None = None
    ) -> None:
        if self.captured_playout_segments <= self._finished:  # a segment this wrapper never captured (before it)
            return
        self._finished += 1
        said = self._pacer._on_playback_finished(playback_position, interrupted)
        super().on_playback_finished(
            playback_position=playback_position,
            interrupted=interrupted,
            synchronized_transcript=synchronized_transcript if said is None else said,
        )

    def on_attached(self) -> None:
        super().on_attached()
        self._pacer._set_attached(audio=True)

    def on_detached(self) -> None:
        super().on_detached()
        self._pacer._set_attached(audio=False)


class PacedText(TextOutput):
    def __init__(self, pacer: TranscriptPacer, next_in_chain: TextOutput | None) -> None:
        super().__init__(label="LexvozPacer", next_in_chain=next_in_chain)
        self._pacer = pacer

    async def capture_text(self, text: str) -> None:
        if not self._pacer._enabled:
            if self.next_in_chain:
                await self.next_in_chain.capture_text(text)
            return
        self._pacer._on_text(str(text))

    def flush(self) -> None:
        if not self._pacer._enabled:
            if self.next_in_chain:
                self.next_in_chain.flush()
            return
        self._pacer._on_text_flush()

    def on_attached(self) -> None:
        super().on_attached()
        self._pacer._set_attached(text=True)

    def on_detached(self) -> None:
        super().on_detached()
        self._pacer._set_attached(text=False)
