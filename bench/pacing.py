"""Transcript pacing side by side: livekit-agents' `TranscriptSynchronizer` against Lexvoz's `TranscriptPacer`.

The same agent audio and text go through each: `--seconds` of 24 kHz speech-like audio in `--frame-ms` frames,
made from the text itself (a voiced burst of jittered length per syllable of each word, silence at punctuation),
cut into answers of about `--answer-s` seconds, with the Spanish text sent the way the Realtime stand-in sends it:
100 ms steps, each the words that begin to sound in it and then the step's audio, `--speed` times faster than
real time (the model sends its answer faster than it is played). A fake speaker plays each answer in real time
from its first frame and reports the playback as livekit-agents' room output does (`playback_started`, then
`playback_finished` with the position), and a fake room output records when each piece of text reached it.

Figures, for each of `off` (no pacing: the harness alone), `played` (ours) and `framework` (livekit-agents'):
- CPU-s of this process per minute of agent audio, and the same less the `off` run (the pacing's own cost);
- the lead of text over audio: for every piece the room received, how long before the last word in it begins to
  sound (by the syllable timeline the audio was made from, which neither pacer sees) it arrived. Positive is
  early. Our pacer weighs letters and the framework's listens to the audio, so neither is favoured by it.

No stack is needed. `python bench/pacing.py [--seconds 60]` prints one JSON line and writes
`bench/results/pacing.json`. Run it on an idle host (or under the shared lock): the CPU figures are the point.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from livekit import rtc  # noqa: E402
from livekit.agents.voice.io import AudioOutput, AudioOutputCapabilities, TextOutput  # noqa: E402
from livekit.agents.voice.transcription import TranscriptSynchronizer  # noqa: E402

from agent.voice.pacing import TranscriptPacer  # noqa: E402
from bench.stats import percentile  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "pacing.json"
SAMPLE_RATE = 24_000
STEP_S = 0.1
SYLLABLE_S = 0.2  # Spanish speech: about five syllables a second
PAUSE_S = {",": 0.15, ";": 0.3, ".": 0.35}
VOCABULARY = (
    "la constitución política de la república de panamá establece en su artículo diecisiete que las "
    "autoridades están instituidas para proteger en su vida, honra y bienes a los nacionales dondequiera se "
    "encuentren y a los extranjeros que estén bajo su jurisdicción; asegurar la efectividad de los derechos y "
    "deberes individuales y sociales, y cumplir y hacer cumplir la constitución y la ley. según la fuente "
    "consultada, esto es orientación y no asesoría legal. para su caso, consulte a un abogado."
).split()
_NUCLEUS = re.compile(r"[aeiouáéíóúü]+")
_STRONG = set("aeoáéíóú")


def syllables(word: str) -> int:
    """Spanish syllables by vowel groups, two strong vowels side by side being two (a hiatus)."""
    n = 0
    for group in _NUCLEUS.findall(word.lower()):
        n += 1 + sum(1 for a, b in itertools.pairwise(group) if a in _STRONG and b in _STRONG)
    return max(n, 1)


@dataclass
class Answer:
    deltas: list[str]  # one per step ("" when no word begins in it)
    frames: list[list[rtc.AudioFrame]]  # the audio frames of each step
    sounds_from: list[float]  # per word: when it begins to sound, from the answer's playback start

    @property
    def seconds(self) -> float:
        return len(self.deltas) * STEP_S


def speak(words: list[str], rng: np.random.Generator) -> tuple[np.ndarray, list[float]]:
    """Audio for `words`: a voiced burst per syllable (its length jittered), silence at punctuation; and when
    each word begins. The ground truth both pacers are measured against: neither sees it."""
    pieces: list[np.ndarray] = []
    starts: list[float] = []
    at = 0.0
    for word in words:
        starts.append(at)
        for _ in range(syllables(word)):
            n = int(SYLLABLE_S * rng.uniform(0.75, 1.25) * SAMPLE_RATE)
            t = np.arange(n) / SAMPLE_RATE
            pitch = rng.uniform(110, 170)
            voiced = 0.6 * np.sign(np.sin(2 * np.pi * pitch * t)) + rng.normal(0, 0.4, n)
            pieces.append(voiced * np.sin(np.pi * np.arange(n) / n) ** 1.5 * 0.25)
            at += n / SAMPLE_RATE
        pause = PAUSE_S.get(word[-1], 0.0)
        if pause:
            pieces.append(np.zeros(int(pause * SAMPLE_RATE)))
            at += pause
    audio = np.concatenate(pieces)
    return np.clip(audio * 32767, -32768, 32767).astype(np.int16), starts


def make_answers(total_s: float, answer_s: float, frame_ms: int, seed: int = 7) -> list[Answer]:
    """Answers of about `answer_s` seconds until `total_s` of audio; text sent like the stand-in's (each step's
    words, those beginning to sound in it, then the step's audio)."""
    rng = np.random.default_rng(seed)
    per_frame = SAMPLE_RATE * frame_ms // 1000
    frames_per_step = round(STEP_S * 1000 / frame_ms)
    per_step = per_frame * frames_per_step
    answers: list[Answer] = []
    spoken_s, word_index = 0.0, 0
    while spoken_s < total_s - 1.0:
        words: list[str] = []
        while sum(syllables(w) for w in words) * SYLLABLE_S < min(answer_s, total_s - spoken_s):
            words.append(VOCABULARY[word_index % len(VOCABULARY)])
            word_index += 1
        audio, starts = speak(words, rng)
        steps = -(-len(audio) // per_step)
        audio = np.pad(audio, (0, steps * per_step - len(audio)))
        deltas = ["" for _ in range(steps)]
        for i, (word, start) in enumerate(zip(words, starts, strict=True)):
            k = int(start / STEP_S)
            deltas[k] += (" " if i else "") + word
        frames = [
            [
                rtc.AudioFrame(audio[o : o + per_frame].tobytes(), SAMPLE_RATE, 1, per_frame)
                for o in range(k * per_step, (k + 1) * per_step, per_frame)
            ]
            for k in range(steps)
        ]
        answers.append(Answer(deltas, frames, starts))
        spoken_s += steps * STEP_S
    return answers


class RealTimeSpeaker(AudioOutput):
    """Plays each segment in real time from its first frame, as livekit-agents' room output reports it."""

    def __init__(self) -> None:
        super().__init__(label="speaker", capabilities=AudioOutputCapabilities(pause=False), sample_rate=SAMPLE_RATE)
        self.pushed = 0.0
        self.started_at: float | None = None
        self._done: asyncio.TimerHandle | None = None

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if self.started_at is None:
            self.started_at = time.time()
            self.on_playback_started(created_at=self.started_at)
        self.pushed += frame.duration

    def flush(self) -> None:
        super().flush()
        if self.started_at is not None:
            remaining = self.started_at + self.pushed - time.time()
            self._done = asyncio.get_running_loop().call_later(max(0.0, remaining), self._finish)

    def clear_buffer(self) -> None:
        pass

    def _finish(self) -> None:
        position, self.pushed, self.started_at = self.pushed, 0.0, None
        self.on_playback_finished(playback_position=position, interrupted=False)


@dataclass
class Room(TextOutput):
    pieces: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(label="room", next_in_chain=None)

    async def capture_text(self, text: str) -> None:
        self.pieces.append((time.time(), str(text)))

    def flush(self) -> None:
        pass


Outputs = tuple[AudioOutput, TextOutput, Callable[[], Any]]


def off(speaker: AudioOutput, room: TextOutput) -> Outputs:
    async def close() -> None:
        pass

    return speaker, room, close


def played(speaker: AudioOutput, room: TextOutput) -> Outputs:
    pacer = TranscriptPacer()
    audio, text = pacer.wrap(speaker, room)
    return audio, text, pacer.aclose


def framework(speaker: AudioOutput, room: TextOutput) -> Outputs:
    sync = TranscriptSynchronizer(next_in_chain_audio=speaker, next_in_chain_text=room)
    return sync.audio_output, sync.text_output, sync.aclose


VARIANTS: dict[str, Callable[[AudioOutput, TextOutput], Outputs]] = {
    "off": off,
    "played": played,
    "framework": framework,
}


async def play(
    answers: list[Answer], make: Callable[[AudioOutput, TextOutput], Outputs], speed: float
) -> dict[str, Any]:
    speaker, room = RealTimeSpeaker(), Room()
    audio, text, close = make(speaker, room)
    leads: list[float] = []
    started: list[float] = []
    audio.on("playback_started", lambda ev: started.append(ev.created_at))
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    for answer in answers:
        room.pieces.clear()
        started.clear()
        for delta, frames in zip(answer.deltas, answer.frames, strict=True):
            if delta:
                await text.capture_text(delta)
            for frame in frames:
                await audio.capture_frame(frame)
            await asyncio.sleep(STEP_S / speed)
        text.flush()
        audio.flush()
        await audio.wait_for_playout()
        await asyncio.sleep(0.05)  # the last pieces of text on their way
        shown = 0
        for at, piece in room.pieces:
            shown += len(piece.split())
            if shown:
                leads.append(answer.sounds_from[min(shown, len(answer.sounds_from)) - 1] - (at - started[0]))
        await asyncio.sleep(0.2)  # a pause between answers
    cpu = time.process_time() - cpu_start
    wall = time.perf_counter() - wall_start
    await close()
    audio_s = sum(a.seconds for a in answers)
    return {
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 1),
        "cpu_s_per_audio_minute": round(cpu / (audio_s / 60), 3),
        "max_lead_s": round(max(leads), 3),
        "p95_lead_s": round(percentile(leads, 95), 3),
        "median_lead_s": round(percentile(leads, 50), 3),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    answers = make_answers(args.seconds, args.answer_s, args.frame_ms)
    warm = make_answers(2.0, 2.0, args.frame_ms)
    audio_s = sum(a.seconds for a in answers)
    result: dict[str, Any] = {
        "bench": "pacing",
        "audio_s": round(audio_s, 1),
        "answers": len(answers),
        "frame_ms": args.frame_ms,
        "speed": args.speed,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    for name in args.variants:
        await play(warm, VARIANTS[name], args.speed)  # first use pays for lazy loading (hyphenation patterns)
        result[name] = await play(answers, VARIANTS[name], args.speed)
    if "off" in result:
        for name in ("played", "framework"):
            if name in result:
                own = result[name]["cpu_s"] - result["off"]["cpu_s"]
                result[name]["pacing_cpu_s_per_audio_minute"] = round(own / (audio_s / 60), 3)
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["python"] = platform.python_version()
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--seconds", type=float, default=60.0, help="agent audio per variant")
    p.add_argument("--answer-s", type=float, default=12.0, help="length of each answer")
    p.add_argument("--frame-ms", type=int, default=20, choices=(10, 20))
    p.add_argument("--speed", type=float, default=4.0, help="how much faster than real time the answer arrives")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()
    result = asyncio.run(main_async(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
