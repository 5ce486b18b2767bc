"""The agent's transcript paced by the audio actually played, without analysing that audio.

livekit-agents paces the agent's words with its `TranscriptSynchronizer`, which runs a spectral speaking-rate
analysis (FFTs) on every frame of the agent's audio; profiles put that at ~30 % (up to ~70 %) of a job
process's busy time. The page needs much less: a word must not appear before it is spoken, a cut-off answer
must stop where the person stopped hearing it, and what the model remembers of that answer must be what the
page shows. `TranscriptPacer` does that with what the audio chain already tells: how much audio was handed on
(frame durations), when the next output started playing it (`playback_started`), how far it got when it stopped
(`playback_finished(playback_position=...)`), and pauses. Per frame it only adds a duration.

How a word's time is estimated: each word weighs its letters (a digit four, a comma or a sentence end the pause
they bring). While a segment is still arriving the pacer assumes a deliberately slow rate (or the rate of what
has arrived, if slower), so words lag rather than lead; once the segment's text and audio are both complete it
knows the segment's own rate (weight per second of audio), the framework's `_reestimate_speed` idea without
the spectral part. A word is shown once playback reaches its middle.

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
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from livekit import rtc
from livekit.agents import AgentSession
from livekit.agents.voice.io import AudioOutput, AudioOutputCapabilities, TextOutput

logger = logging.getLogger("lexvoz.pacing")

# A word: optional leading space, non-space, then the space that proves the word is complete.
_WORD = re.compile(r"\s*\S+\s+")
_PAUSE_SHORT = frozenset(",;:")
_PAUSE_LONG = frozenset(".!?…")


@dataclass(frozen=True, slots=True)
class PacingOptions:
    """How the pacer weighs words before a segment's own rate is known."""

    provisional_rate: float = 10.0
    """Weight units (letters) per second assumed while a segment is still arriving. Spanish speech runs at
    about 12-15 letters a second, so this makes words lag a little, never lead, until the real rate is known."""
    reveal_at: float = 0.5
    """How far into a word's sound playback must be before the word is shown (0: its start, 1: its end)."""


def word_weight(word: str) -> float:
    """How long a word takes to say, in letters: Spanish spelling is close to its sounds, a digit is read as a
    word of about four letters, and punctuation is the pause the voice makes there."""
    weight = 0.0
    for ch in word:
        if ch.isalpha():
            weight += 1.0
        elif ch.isdigit():
            weight += 4.0
        elif ch in _PAUSE_SHORT:
            weight += 2.0
        elif ch in _PAUSE_LONG:
            weight += 4.0
    return weight


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


@dataclass
class _Word:
    end: int  # index in the segment's text just past the word (and its trailing space)
    start_weight: float
    weight: float


@dataclass(eq=False)
class _Segment:
    """One message: its text and its audio, from first piece to the end of its playback."""

    text: str = ""
    words: list[_Word] = field(default_factory=list)
    scanned: int = 0
    weight: float = 0.0
    text_done: bool = False
    audio_s: float = 0.0
    frames: int = 0
    audio_done: bool = False
    audio_whole: bool = False  # flushed without being cleared at the same moment: the audio is complete
    cleared: bool = False
    started_at: float | None = None
    paused_before_start: float = 0.0
    finished: bool = False
    released: bool = False  # played to the end (or never had audio): the whole text is due
    cut: int | None = None  # interrupted: the text is due up to here, never further
    dropped: bool = False  # its audio never reached the output: nothing is shown
    forwarded: int = 0
    shown_words: int = 0

    def add_text(self, piece: str) -> None:
        self.text += piece
        self._scan()

    def end_text(self) -> None:
        self.text_done = True
        self._scan()

    def _scan(self) -> None:
        for m in _WORD.finditer(self.text, self.scanned):
            self._add_word(m.end())
        if self.text_done and self.scanned < len(self.text):
            self._add_word(len(self.text))

    def _add_word(self, end: int) -> None:
        w = word_weight(self.text[self.scanned : end])
        self.words.append(_Word(end, self.weight, w))
        self.weight += w
        self.scanned = end

    def rate(self, provisional: float) -> float:
        """Weight per second of audio: the segment's own once both sides are whole, else a rate that errs slow."""
        if self.text_done and self.audio_whole and self.weight > 0 and self.audio_s > 0:
            return self.weight / self.audio_s
        if self.audio_s > 0 and self.weight > 0:
            return min(provisional, self.weight / self.audio_s)
        return provisional

    def text_until(self, heard_weight: float) -> int:
        """The text whose words had begun to sound when `heard_weight` had been said."""
        end = self.forwarded
        for word in self.words:
            if word.start_weight < heard_weight and word.end > end:
                end = word.end
        return end


class _PacedAudio(AudioOutput):
    def __init__(self, pacer: TranscriptPacer, next_in_chain: AudioOutput) -> None:
        super().__init__(
            label="LexvozPacer", capabilities=AudioOutputCapabilities(pause=True), next_in_chain=next_in_chain
        )
        self._pacer = pacer

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
        if not self._pending_playback_count:  # a segment this wrapper never counted (e.g. captured before it)
            return
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


class _PacedText(TextOutput):
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


class TranscriptPacer:
    """Paces the agent's transcript by the audio played, in front of livekit-agents' audio and text outputs.

    Either wrap two outputs yourself (`wrap`) and hand `audio_output` / `text_output` to the session, or
    `attach` it to a session before `start` and call `install` after: it wraps the session's outputs (the
    room's, once the room is joined) no later than the first speech is created, so no answer goes unpaced.
    """

    def __init__(self, options: PacingOptions | None = None, *, clock: PacingClock | None = None) -> None:
        self.options = options or PacingOptions()
        self._clock: PacingClock = clock or _WallClock()
        self._segments: deque[_Segment] = deque()
        self._audio: _PacedAudio | None = None
        self._text: _PacedText | None = None
        self._next_text: TextOutput | None = None
        self._session: AgentSession[Any] | None = None
        self._audio_attached = True
        self._text_attached = True
        self._paused_since: float | None = None
        self._paused_total = 0.0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # -- wiring -------------------------------------------------------------------------------------------

    def wrap(self, audio: AudioOutput, text: TextOutput | None) -> tuple[AudioOutput, TextOutput]:
        """Put the pacer in front of `audio` and `text` (the next outputs in the chain); once only."""
        if self._audio is not None:
            raise RuntimeError("this pacer already wraps a pair of outputs")
        self._next_text = text
        self._audio = _PacedAudio(self, audio)
        self._text = _PacedText(self, text)
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
        if not self._enabled:  # nothing will pace these any more: show what they hold
            for seg in self._segments:
                if not seg.dropped and seg.cut is None:
                    seg.released = True
            self._poke()

    def _text_segment(self) -> _Segment:
        last = self._segments[-1] if self._segments else None
        if last is not None and not last.text_done:
            if not last.finished:
                return last
            last.end_text()  # its playback ended before any text of its own: this text is the next message's
        if last is not None and last.frames == 0 and not last.audio_done and not last.finished:
            # A finished text that never got audio, and the next text begins: it was a message without sound.
            last.released = last.audio_done = True
        return self._new_segment()

    def _audio_segment(self) -> _Segment:
        for seg in self._segments:
            if not seg.audio_done:
                return seg
        return self._new_segment()

    def _new_segment(self) -> _Segment:
        seg = _Segment()
        self._segments.append(seg)
        self._ensure_task()
        return seg

    def _playing(self) -> _Segment | None:
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
        if seg.frames == 0:
            if not seg.released:
                seg.dropped = True  # its audio never reached the output: the person heard none of it
        else:
            # flush() then clear_buffer() in one go is a cancelled forwarding: that audio is not the whole.
            asyncio.get_running_loop().call_soon(self._settle_audio, seg)
        self._poke()

    def _settle_audio(self, seg: _Segment) -> None:
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

    def _played(self, seg: _Segment, now: float) -> float:
        assert seg.started_at is not None
        elapsed = now - seg.started_at - (self._paused_until(now) - seg.paused_before_start)
        return min(seg.audio_s, max(0.0, elapsed))

    def _due(self, seg: _Segment) -> tuple[int, float | None]:
        """How much of the segment's text is due now, and in how many seconds to look again (None: on events)."""
        if seg.dropped:
            return seg.forwarded, None
        if seg.released:
            return len(seg.text), None
        if seg.cut is not None:
            return max(seg.forwarded, seg.cut), None
        if seg.started_at is None:
            return seg.forwarded, None
        now = self._clock.time()
        played = self._played(seg, now)
        rate = seg.rate(self.options.provisional_rate)
        heard = played * rate
        reveal = self.options.reveal_at
        due = seg.forwarded
        while seg.shown_words < len(seg.words):
            word = seg.words[seg.shown_words]
            if word.start_weight + reveal * word.weight > heard:
                break
            due = max(due, word.end)
            seg.shown_words += 1
        if seg.shown_words >= len(seg.words):
            return due, None  # the next word is not complete yet: its text will wake us
        word = seg.words[seg.shown_words]
        at = (word.start_weight + reveal * word.weight) / rate
        if self._paused_since is not None:
            return due, None  # resume wakes us
        if at > seg.audio_s and not seg.audio_done:
            # its audio has not arrived: look again when what has arrived runs out (more audio may come by then)
            return due, max(seg.audio_s - played, 0.05)
        return due, max(at - played, 0.005)

    def _over(self, seg: _Segment) -> bool:
        if not seg.text_done:
            return False
        if seg.dropped:
            return seg.audio_done
        if seg.released:
            return seg.forwarded >= len(seg.text)
        if seg.cut is not None:
            return seg.forwarded >= seg.cut
        return False

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
                due, wait = self._due(seg)
                if due > seg.forwarded:
                    piece, seg.forwarded = seg.text[seg.forwarded : due], due
                    await self._forward(piece)
                    continue
                if self._over(seg):
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

__all__ = ["PacingClock", "PacingOptions", "TranscriptPacer", "word_weight"]
