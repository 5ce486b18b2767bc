"""The transcript pacer on its own: a manual clock, a fake speaker as the next audio output, a recording text output.

Every test pushes a segment the way livekit-agents does for a Realtime answer (text and audio faster than real
time, then `flush` on both; `clear_buffer` on a barge-in; `wait_for_playout` for the outcome) and moves the
clock by hand. Words all weigh the same, so the ground truth is exact: with N words over D seconds of audio,
word k sounds from k*D/N on.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

import pytest
from livekit import rtc
from livekit.agents.voice.io import AudioOutput, AudioOutputCapabilities, PlaybackFinishedEvent, TextOutput

from agent.settings import Settings, SettingsError
from agent.voice.pacing import PacingOptions, TranscriptPacer

SAMPLE_RATE = 24_000
FRAME_S = 0.02
STEP_S = 0.01


class ManualClock:
    """Wall time that moves only when told; timers fire as it passes them."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self._timers: list[tuple[float, int, _Timer]] = []
        self._seq = itertools.count()

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(callback)
        heapq.heappush(self._timers, (self.now + delay, next(self._seq), timer))
        return timer

    async def advance(self, seconds: float) -> None:
        end = self.now + seconds
        while self._timers and self._timers[0][0] <= end:
            at, _, timer = heapq.heappop(self._timers)
            self.now = max(self.now, at)
            if not timer.cancelled:
                timer.callback()
            await settle()
        self.now = end
        await settle()


class _Timer:
    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


class FakeSpeaker(AudioOutput):
    """Plays in real (manual-clock) time from its first frame, `delay_s` later; reports what it played."""

    def __init__(self, clock: ManualClock, *, delay_s: float = 0.0) -> None:
        pausable = AudioOutputCapabilities(pause=True)
        super().__init__(label="fake-speaker", capabilities=pausable, sample_rate=SAMPLE_RATE)
        self.clock = clock
        self.delay_s = delay_s
        self._reset()

    def _reset(self) -> None:
        self.pushed = 0.0
        self.started_at: float | None = None
        self.paused_at: float | None = None
        self.paused_s = 0.0
        self.flushed = False
        self.cut = False
        self._end: _Timer | None = None
        self._start: _Timer | None = None

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if self._start is None and self.started_at is None:
            self._start = self.clock.call_later(self.delay_s, self._started)
        self.pushed += frame.duration

    def _started(self) -> None:
        self.started_at = self.clock.time()
        self.on_playback_started(created_at=self.started_at)
        self._arm()

    def played(self) -> float:
        if self.started_at is None:
            return 0.0
        paused = self.paused_s + ((self.clock.time() - self.paused_at) if self.paused_at is not None else 0.0)
        return min(self.pushed, max(0.0, self.clock.time() - self.started_at - paused))

    def _arm(self) -> None:
        if self._end is not None:
            self._end.cancel()
        if self.flushed and self.started_at is not None and self.paused_at is None:
            self._end = self.clock.call_later(self.pushed - self.played(), lambda: self._finish(False))

    def flush(self) -> None:
        super().flush()
        self.flushed = True
        if self.cut:
            self._finish(True)
        else:
            self._arm()

    def clear_buffer(self) -> None:
        self.cut = True
        if self.flushed:
            self._finish(True)

    def pause(self) -> None:
        self.paused_at = self.clock.time()
        if self._end is not None:
            self._end.cancel()

    def resume(self) -> None:
        if self.paused_at is not None:
            self.paused_s += self.clock.time() - self.paused_at
            self.paused_at = None
        self._arm()

    def _finish(self, interrupted: bool) -> None:
        position = self.played()
        for timer in (self._end, self._start):
            if timer is not None:
                timer.cancel()
        self._reset()
        self.on_playback_finished(playback_position=position, interrupted=interrupted)


class RecordingText(TextOutput):
    """The room's transcription output as the page would see it: each piece with the time it arrived."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(label="recording", next_in_chain=None)
        self.clock = clock
        self.pieces: list[tuple[float, str]] = []
        self.flushes: list[int] = []  # how many pieces had arrived at each flush

    async def capture_text(self, text: str) -> None:
        self.pieces.append((self.clock.time(), text))

    def flush(self) -> None:
        self.flushes.append(len(self.pieces))

    @property
    def text(self) -> str:
        return "".join(t for _, t in self.pieces)

    def words(self) -> int:
        return len(self.text.split())


class Rig:
    def __init__(self, *, delay_s: float = 0.0, options: PacingOptions | None = None) -> None:
        self.clock = ManualClock()
        self.speaker = FakeSpeaker(self.clock, delay_s=delay_s)
        self.page = RecordingText(self.clock)
        self.pacer = TranscriptPacer(options, clock=self.clock)
        audio, text = self.pacer.wrap(self.speaker, self.page)
        self.audio, self.text = audio, text

    async def say(self, words: list[str], seconds: float, *, flush_audio: bool = True) -> None:
        """Hand over a message as the framework does a Realtime answer: text and audio at once, then flush."""
        for w in words:
            await self.text.capture_text(w + " ")
        self.text.flush()
        await self.push_audio(seconds)
        if flush_audio:
            self.audio.flush()
        await settle()

    async def push_audio(self, seconds: float) -> None:
        for _ in range(round(seconds / FRAME_S)):
            await self.audio.capture_frame(rtc.AudioFrame.create(SAMPLE_RATE, 1, int(SAMPLE_RATE * FRAME_S)))

    async def aclose(self) -> None:
        await self.pacer.aclose()


def words(n: int) -> list[str]:
    return ["casa"] * n


def playout(audio: AudioOutput) -> asyncio.Task[PlaybackFinishedEvent]:
    return asyncio.ensure_future(audio.wait_for_playout())


@pytest.mark.parametrize("delay_s", [0.0, 0.3], ids=["starts-at-once", "starts-later"])
async def test_no_word_is_shown_before_its_audio_plays(delay_s: float) -> None:
    rig = Rig(delay_s=delay_s)
    n, seconds = 10, 2.0
    await rig.say(words(n), seconds)
    done = playout(rig.audio)
    halfway_words = None
    while not done.done():
        await rig.clock.advance(STEP_S)
        played = rig.speaker.played() if not done.done() else seconds
        # word k sounds from k * seconds / n on: k + 1 words may be up once word k has begun
        assert rig.page.words() <= int(played / (seconds / n)) + 1, (played, rig.page.text)
        if halfway_words is None and played >= seconds / 2:
            halfway_words = rig.page.words()
    assert halfway_words is not None and halfway_words >= n // 2 - 1  # paced along, not held to the end
    assert rig.page.text == "casa " * n
    await rig.aclose()


async def test_audio_arriving_in_real_time_keeps_words_behind_it() -> None:
    """Text far ahead of its audio (the whole answer, audio still streaming): the provisional rate errs slow."""
    rig = Rig()
    n = 10
    for w in words(n):
        await rig.text.capture_text(w + " ")
    rig.text.flush()
    for _ in range(100):  # 2 s of audio, pushed as fast as it plays
        await rig.push_audio(FRAME_S)
        await rig.clock.advance(FRAME_S)
        assert rig.page.words() <= int(rig.speaker.played() / 0.2) + 1, rig.page.text
    rig.audio.flush()
    done = playout(rig.audio)
    await rig.clock.advance(0.5)
    event = await asyncio.wait_for(done, 1)
    await settle()
    assert not event.interrupted
    assert rig.page.text == "casa " * n
    await rig.aclose()


async def test_interruption_cuts_at_the_played_position_and_returns_what_was_said() -> None:
    rig = Rig()
    n, seconds = 20, 4.0
    await rig.say(words(n), seconds)
    await rig.clock.advance(1.3)
    done = playout(rig.audio)
    rig.audio.clear_buffer()  # the barge-in
    event = await asyncio.wait_for(done, 1)
    await settle()
    await rig.clock.advance(5.0)
    said = 7  # words 0..6 began before 1.3 s (each 0.2 s)
    assert event.interrupted and event.playback_position == pytest.approx(1.3)
    assert event.synchronized_transcript == ("casa " * said).rstrip()
    assert rig.page.text == "casa " * said  # the page shows exactly what the chat history will hold
    assert rig.page.flushes == [len(rig.page.pieces)]  # the line is closed once, after its last word
    await rig.aclose()


async def test_a_cut_in_the_first_moments_keeps_the_word_being_said() -> None:
    rig = Rig()
    await rig.say(words(5), 1.0)
    await rig.clock.advance(0.05)
    done = playout(rig.audio)
    rig.audio.clear_buffer()
    event = await asyncio.wait_for(done, 1)
    await settle()
    assert event.synchronized_transcript == "casa"
    assert rig.page.text == "casa "
    await rig.aclose()


async def test_a_finished_playback_flushes_the_whole_text() -> None:
    """However slow the estimate, a playback that ends uninterrupted shows every word of its text."""
    rig = Rig(options=PacingOptions(provisional_rate=0.5))
    await rig.say(["casa"] * 4 + ["constitucionalidad"] * 4, 1.6, flush_audio=False)
    await rig.clock.advance(1.0)
    shown_before_end = rig.page.words()
    rig.audio.flush()
    done = playout(rig.audio)
    await rig.clock.advance(1.0)
    event = await asyncio.wait_for(done, 1)
    await settle()
    assert shown_before_end < 8
    assert not event.interrupted and event.synchronized_transcript == rig.page.text
    assert rig.page.text == "casa " * 4 + "constitucionalidad " * 4
    assert rig.page.flushes == [len(rig.page.pieces)]
    await rig.aclose()


async def test_two_segments_in_a_row_are_paced_each_from_its_own_start() -> None:
    rig = Rig()
    await rig.say(words(4), 0.8)
    done = playout(rig.audio)  # the framework waits for each message's playout
    await rig.clock.advance(1.0)
    await asyncio.wait_for(done, 1)
    first = rig.page.text
    await rig.clock.advance(0.5)  # silence between the two messages
    await rig.say(["perro"] * 5, 1.0)
    second_started = rig.clock.now
    done = playout(rig.audio)
    while not done.done():
        await rig.clock.advance(STEP_S)
        shown_second = len(rig.page.text[len(first) :].split())
        assert shown_second <= int((rig.clock.now - second_started) / 0.2) + 1
    await settle()
    assert first == "casa " * 4
    assert rig.page.text == "casa " * 4 + "perro " * 5
    assert rig.page.flushes == [4, len(rig.page.pieces)] or rig.page.flushes[0] < rig.page.flushes[1]
    assert len(rig.page.flushes) == 2
    await rig.aclose()


async def test_text_whose_audio_never_reached_the_output_is_never_shown() -> None:
    """Cut before its first frame (the framework flushes and clears an empty capture): nothing was heard."""
    rig = Rig()
    for w in words(3):
        await rig.text.capture_text(w + " ")
    rig.text.flush()
    rig.audio.flush()  # no frame was captured
    rig.audio.clear_buffer()
    await rig.clock.advance(2.0)
    assert rig.page.pieces == [] and rig.page.flushes == []
    await rig.say(["perro"] * 2, 0.4)  # the next message is paced as usual
    done = playout(rig.audio)
    await rig.clock.advance(1.0)
    await asyncio.wait_for(done, 1)
    await settle()
    assert rig.page.text == "perro perro "
    await rig.aclose()


async def test_an_empty_message_holds_nothing_up() -> None:
    """A message cut before it produced anything (its text output flushed first, then an audio flush without
    frames) must not keep the next message's words from the page."""
    rig = Rig()
    await rig.say(words(2), 0.4)
    done = playout(rig.audio)
    await rig.clock.advance(1.0)
    await asyncio.wait_for(done, 1)
    rig.text.flush()  # the empty message: no text, no audio
    rig.audio.flush()
    await rig.say(["perro"] * 2, 0.4)
    done = playout(rig.audio)
    await rig.clock.advance(1.0)
    await asyncio.wait_for(done, 1)
    await settle()
    assert rig.page.text == "casa casa perro perro "
    await rig.aclose()


async def test_clear_buffer_during_playback_ends_the_segment_and_the_next_one_starts_clean() -> None:
    rig = Rig()
    await rig.say(words(10), 2.0)
    await rig.clock.advance(0.5)
    rig.audio.clear_buffer()
    event = await asyncio.wait_for(playout(rig.audio), 1)
    assert event.interrupted
    await rig.say(["perro"] * 2, 0.4)
    done = playout(rig.audio)
    await rig.clock.advance(1.0)
    event = await asyncio.wait_for(done, 1)
    await settle()
    assert not event.interrupted
    assert rig.page.text == "casa " * 3 + "perro " * 2  # words 0..2 began before 0.5 s
    assert len(rig.page.flushes) == 2
    await rig.aclose()


async def test_pause_holds_the_words_and_resume_goes_on() -> None:
    rig = Rig()
    await rig.say(words(10), 2.0)
    await rig.clock.advance(0.5)
    rig.audio.pause()
    held = rig.page.words()
    await rig.clock.advance(1.0)
    assert rig.page.words() == held  # nothing plays while paused, so nothing new is shown
    rig.audio.resume()
    done = playout(rig.audio)
    await rig.clock.advance(0.4)
    assert held < rig.page.words() <= int((0.5 + 0.4) / 0.2) + 1
    await rig.clock.advance(2.0)
    await asyncio.wait_for(done, 1)
    await settle()
    assert rig.page.text == "casa " * 10
    await rig.aclose()


async def test_with_the_transcription_detached_text_passes_through() -> None:
    rig = Rig()
    rig.text.on_detached()  # the session turned its transcription output off
    await rig.text.capture_text("casa ")
    assert rig.page.text == "casa "
    await rig.aclose()


def test_transcript_pacing_defaults_to_played() -> None:
    assert Settings().transcript_pacing == "played"


@pytest.mark.parametrize(("old", "mode"), [("false", "off"), ("true", "played")])
def test_the_deprecated_sync_setting_still_chooses(monkeypatch: pytest.MonkeyPatch, old: str, mode: str) -> None:
    monkeypatch.setenv("LEXVOZ_SYNC_TRANSCRIPTS", old)
    assert Settings().transcript_pacing == mode


def test_both_pacing_settings_at_once_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEXVOZ_SYNC_TRANSCRIPTS", "false")
    monkeypatch.setenv("LEXVOZ_TRANSCRIPT_PACING", "framework")
    with pytest.raises(SettingsError, match="LEXVOZ_SYNC_TRANSCRIPTS"):
        Settings()
