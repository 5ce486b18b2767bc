"""The stand-in's energy VAD: where it finds the turns of synthetic audio, and what it ignores.

Offline and fast: no server, no client.
"""

from __future__ import annotations

from realtime_standin import EnergyVad
from tests.standin_helpers import pcm_silence, pcm_tone


def test_vad_ignores_silence_and_short_clicks() -> None:
    vad = EnergyVad()
    assert vad.process(pcm_silence(2000)) == []
    assert vad.process(pcm_tone(40) + pcm_silence(1000)) == []  # 40 ms < 60 ms to start
    assert not vad.speaking


def test_vad_finds_a_tone_turn_in_uneven_chunks() -> None:
    vad = EnergyVad(start_ms=60, stop_ms=500)
    audio = pcm_silence(200) + pcm_tone(700) + pcm_silence(800)
    events = []
    for offset in range(0, len(audio), 1234):  # odd chunk sizes, split mid-sample
        events += vad.process(audio[offset : offset + 1234])
    assert [e.kind for e in events] == ["start", "stop"]
    assert events[0].at_ms == 200
    assert events[1].at_ms == 900
