"""One message as the transcript pacer sees it: its words and their weight, its audio, and what is due when.

Kept apart from the pacer (agent/voice/pacing.py), which owns the outputs and the timing, so the arithmetic of a
segment (how long each word takes, the rate, the cut) can be read on its own.

How a word's time is estimated: each word weighs its letters (a digit four, a comma or a sentence end the pause
they bring). While a segment is still arriving the pacer assumes a deliberately slow rate (or the rate of what
has arrived, if slower), so words lag rather than lead; once the segment's text and audio are both complete it
knows the segment's own rate (weight per second of audio), the framework's `_reestimate_speed` idea without
the spectral part. A word is shown once playback reaches its middle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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


@dataclass
class _Word:
    end: int  # index in the segment's text just past the word (and its trailing space)
    start_weight: float
    weight: float


@dataclass(eq=False)
class PacedSegment:
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

    def due(self, played: float | None, options: PacingOptions, *, paused: bool) -> tuple[int, float | None]:
        """How much of the text is due after `played` seconds of playback (None: not started), and in how many
        seconds to look again (None: only when something changes)."""
        if self.dropped:
            return self.forwarded, None
        if self.released:
            return len(self.text), None
        if self.cut is not None:
            return max(self.forwarded, self.cut), None
        if played is None:
            return self.forwarded, None
        rate = self.rate(options.provisional_rate)
        heard = played * rate
        due = self.forwarded
        while self.shown_words < len(self.words):
            word = self.words[self.shown_words]
            if word.start_weight + options.reveal_at * word.weight > heard:
                break
            due = max(due, word.end)
            self.shown_words += 1
        if self.shown_words >= len(self.words) or paused:
            return due, None  # the next word is not complete yet (its text wakes us), or resume will
        word = self.words[self.shown_words]
        at = (word.start_weight + options.reveal_at * word.weight) / rate
        if at > self.audio_s and not self.audio_done:
            # its audio has not arrived: look again when what has arrived runs out (more may come by then)
            return due, max(self.audio_s - played, 0.05)
        return due, max(at - played, 0.005)

    def over(self) -> bool:
        """Everything it will ever show has been shown (and its text has ended)."""
        if not self.text_done:
            return False
        if self.dropped:
            return self.audio_done
        if self.released:
            return self.forwarded >= len(self.text)
        if self.cut is not None:
            return self.forwarded >= self.cut
        return False


__all__ = ["PacedSegment", "PacingOptions", "word_weight"]
