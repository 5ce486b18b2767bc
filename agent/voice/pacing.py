"""The agent's transcript paced by the audio actually played, without analysing that audio.

livekit-agents paces the agent's words with its `TranscriptSynchronizer`, which runs a spectral speaking-rate
analysis (FFTs) on every frame of the agent's audio; profiles put that at ~30 % (up to ~70 %) of a job
process's busy time. The page needs much less: a word must not appear before it is spoken, a cut-off answer
must stop where the person stopped hearing it, and what the model remembers of that answer must be what the
page shows. `TranscriptPacer` does that with what the audio chain already tells: how much audio was handed on
(frame durations), when the next output started playing it (`playback_started`), how far it got when it stopped
(`playback_finished(playback_position=...)`), and pauses. Per frame it only adds a duration. How a word's time
is estimated: agent/voice/paced_segment.py.

On an interrupted playback the words whose sound had begun by the reported position are shown and everything
after them is dropped; that same text is returned to the framework as `synchronized_transcript`, which it puts
in the chat history (and in the Realtime `conversation.item.truncate`) instead of the whole answer. An
uninterrupted playback releases the whole text at once. Text whose audio never reached the output (cut before
its first frame) is never shown, as the framework's synchronizer does.

It sits in front of livekit-agents' own outputs through their public chain (`session.output.audio` /
`session.output.transcription`), after the agent's `transcription_node` (so the citation check still sees every
word at once) and beside the session's events (so the cut-off notice is unchanged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from livekit.agents import AgentSession
from livekit.agents.voice.io import AudioOutput, TextOutput

from agent.voice.paced_outputs import PacedAudio, PacedText
from agent.voice.paced_segment import PacedSegment, PacingOptions

logger = logging.getLogger("lexvoz.pacing")


class _Cancellable(Protocol):
    def cancel(self) -> None: ...


class PacingClock(Protocol):
    """Wall time (the clock of `playback_started`'s `created_at`) and a timer; tests pass a manual one."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Cancellable: ...


class _WallClock:
    def time(self) -> float:
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Cancellable:
        return asyncio.get_running_loop().call_later(delay, callback)


class TranscriptPacer:
    """Paces the agent's transcript by the audio played, in front of livekit-agents' audio and text outputs.

    Either wrap two outputs yourself (`wrap`) and hand `audio_output` / `text_output` to the session, or
    `attach` it to a session before `start` and call `install` after: it wraps the session's outputs (the
    room's, once the room is joined) no later than the first speech is created, so no answer goes unpaced.
    """

    def __init__(self, options: PacingOptions | None = None, *, clock: PacingClock | None = None) -> None:
        self.options = options or PacingOptions()
        self._clock: PacingClock = clock or _WallClock()
        self._segments: deque[PacedSegment] = deque()
        self._audio: PacedAudio | None = None
        self._text: PacedText | None = None
        self._next_text: TextOutput | None = None
        self._session: AgentSession[Any] | None = None
        self._audio_attached = self._text_attached = True
        self._paused_since: float | None = None  # pauses are counted across segments: a new one may start paused
        self._paused_total = 0.0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def wrap(self, audio: AudioOutput, text: TextOutput | None) -> tuple[AudioOutput, TextOutput]:
        """Put the pacer in front of `audio` and `text` (the next outputs in the chain); once only."""
        if self._audio is not None:
            raise RuntimeError("this pacer already wraps a pair of outputs")
        self._next_text = text
        self._audio = PacedAudio(self, audio)
        self._text = PacedText(self, text)
        return self._audio, self._text

    @property
    def audio_output(self) -> AudioOutput | None:
        return self._audio

    @property
    def text_output(self) -> TextOutput | None:
        return self._text

    def attach(self, session: AgentSession[Any]) -> None:
        """Call before `session.start`: install on the first speech if `install` has not run by then."""
        self._session = session
        session.on("speech_created", lambda _ev: self.install())
        session.on("close", lambda _ev: self._close_soon())

    def install(self) -> bool:
        """Wrap the attached session's audio and transcription outputs, if both exist; True once installed."""
        session = self._session
        if self._audio is not None:
            return True
        if session is None or self._closed:
            return False
        audio, text = session.output.audio, session.output.transcription
        if audio is None or text is None:
            return False
        paced_audio, paced_text = self.wrap(audio, text)
        session.output.audio = paced_audio
        session.output.transcription = paced_text
        return True

    async def aclose(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _close_soon(self) -> None:
        task = asyncio.get_running_loop().create_task(self.aclose())
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    # -- state changes from the outputs ---------------------------------------------------------------------

    @property
    def _enabled(self) -> bool:
        return self._audio_attached and self._text_attached and not self._closed

    def _set_attached(self, *, audio: bool | None = None, text: bool | None = None) -> None:
        if audio is not None:
            self._audio_attached = audio
        if text is not None:
            self._text_attached = text
        if not self._enabled:  # nothing paces these any more: what played stays, nothing more is shown
            for seg in self._segments:
                if not seg.dropped and seg.cut is None and not seg.released:
                    seg.cut, seg.finished = seg.forwarded, True
                seg.text_done = seg.audio_done = True
            self._poke()

    def _text_segment(self) -> PacedSegment:
        last = self._segments[-1] if self._segments else None
        if last is not None and not last.text_done:
            if not last.finished:
                return last
            last.end_text()  # its playback ended before any text of its own: this text is the next message's
        if last is not None and last.frames == 0 and not last.audio_done and not last.finished:
            # A finished text that never got audio, and the next text begins: it was a message without sound.
            last.released = last.audio_done = True
        return self._new_segment()

    def _audio_segment(self) -> PacedSegment:
        for seg in self._segments:
            if not seg.audio_done:
                return seg
        return self._new_segment()

    def _new_segment(self) -> PacedSegment:
        seg = PacedSegment()
        self._segments.append(seg)
        self._ensure_task()
        return seg

    def _playing(self) -> PacedSegment | None:
        for seg in self._segments:
            if seg.frames and not seg.finished:
                return seg
        return None

    def _on_text(self, piece: str) -> None:
        if piece:
            self._text_segment().add_text(piece)
            self._poke()

    def _on_text_flush(self) -> None:
        last = self._segments[-1] if self._segments else None
        if last is not None and not last.text_done:
            last.end_text()
            self._poke()

    def _on_frame(self, duration: float) -> None:
        seg = self._audio_segment()
        seg.audio_s += duration
        seg.frames += 1

    def _on_audio_flush(self) -> None:
        seg = self._audio_segment()
        seg.audio_done = True
        if seg.frames == 0 and not seg.text:
            self._segments.remove(seg)  # an empty message: nothing to show, and no text may wait on it
        elif seg.frames == 0:
            if not seg.released:
                seg.dropped = True  # its audio never reached the output: the person heard none of it
        else:
            # flush() then clear_buffer() in one go is a cancelled forwarding: that audio is not the whole.
            asyncio.get_running_loop().call_soon(self._settle_audio, seg)
        self._poke()

    def _settle_audio(self, seg: PacedSegment) -> None:
        seg.audio_whole = not seg.cleared
        self._poke()

    def _on_clear(self) -> None:
        seg = self._playing()
        if seg is not None:
            seg.cleared = True

    def _paused_until(self, now: float) -> float:
        """All the time spent paused up to `now`."""
        ongoing = now - self._paused_since if self._paused_since is not None else 0.0
        return self._paused_total + max(0.0, ongoing)

    def _on_pause(self) -> None:
        if self._paused_since is None:
            self._paused_since = self._clock.time()
        self._poke()

    def _on_resume(self) -> None:
        if self._paused_since is not None:
            self._paused_total += max(0.0, self._clock.time() - self._paused_since)
            self._paused_since = None
        self._poke()

    def _on_playback_started(self, created_at: float) -> None:
        for seg in self._segments:
            if seg.frames and seg.started_at is None and not seg.finished:
                seg.started_at = created_at
                seg.paused_before_start = self._paused_until(created_at)
                break
        self._poke()

    def _on_playback_finished(self, position: float, interrupted: bool) -> str | None:
        """What was said of the segment that stopped, for the framework's chat history (None: not ours)."""
        seg = self._playing()
        if seg is None or not self._enabled:
            return None
        seg.finished = True
        if not interrupted:
            seg.released = True
            self._poke()
            return seg.text
        heard = max(0.0, position) * seg.rate(self.options.provisional_rate)
        seg.cut = seg.text_until(heard) if heard > 0 else seg.forwarded
        self._poke()
        return seg.text[: seg.cut].rstrip()

    # -- the pacing loop ------------------------------------------------------------------------------------

    def _poke(self) -> None:
        self._wake.set()

    def _ensure_task(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="lexvoz.transcript_pacer")

    def _played(self, seg: PacedSegment) -> float | None:
        """Seconds of the segment played so far (None: not started): wall time since its start, less pauses."""
        if seg.started_at is None:
            return None
        now = self._clock.time()
        elapsed = now - seg.started_at - (self._paused_until(now) - seg.paused_before_start)
        return min(seg.audio_s, max(0.0, elapsed))

    async def _forward(self, piece: str) -> None:
        if self._next_text is None:
            return
        try:
            await self._next_text.capture_text(piece)
        except Exception:  # the room's output failing must not stop the pacing of what follows
            logger.exception("transcript output failed")

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            seg = self._segments[0] if self._segments else None
            wait: float | None = None
            if seg is not None:
                due, wait = seg.due(self._played(seg), self.options, paused=self._paused_since is not None)
                if due > seg.forwarded:
                    piece, seg.forwarded = seg.text[seg.forwarded : due], due
                    await self._forward(piece)
                    continue
                if seg.over():
                    self._segments.popleft()
                    if self._next_text is not None and seg.forwarded:
                        self._next_text.flush()
                    continue
            timer = self._clock.call_later(wait, self._wake.set) if wait is not None else None
            try:
                await self._wake.wait()
            finally:
                if timer is not None:
                    timer.cancel()


_closing: set[asyncio.Task[None]] = set()

__all__ = ["PacingClock", "PacingOptions", "TranscriptPacer"]
