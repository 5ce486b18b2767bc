"""The voice-to-voice overhead benchmark's arithmetic (`bench/latency.py`) and the stand-in's timing record it
subtracts: the stand-in's own time must come out of the figure, and nothing else."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from typing import Any

import aiohttp
import numpy as np
import pytest

from bench.latency import (
    CLOCK_TOLERANCE_S,
    ONSET_WITHIN_S,
    UNMATCHED_REASONS,
    Talk,
    Tally,
    TurnSplit,
    compare,
    match_talk,
    split_turn,
    summarize,
)
from realtime_standin import RealtimeStandIn
from realtime_standin.timings import TurnTimings
from tests.person import ONSET_GAP_S, AgentAudioWatch
from tests.standin_helpers import RawClient, pcm_silence


def _e(kind: str, at: float, response_id: str | None = None, item_id: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"connection": 1, "kind": kind, "at": at}
    if response_id is not None:
        entry["response_id"] = response_id
    if item_id is not None:
        entry["item_id"] = item_id
    return entry


def _lexvoz_turn(item: str, stop: float, n: int) -> list[dict[str, Any]]:
    """What the stand-in records for one Lexvoz turn: the speech ends at `stop`, the server's own response calls
    the tool 2 ms later, the worker asks for the answer 88 ms after that, whose audio is out 3 ms later."""
    call, answer = f"resp_call_{n}", f"resp_answer_{n}"
    return [
        _e("speech_stopped", stop, item_id=item),
        _e("response_created", stop + 0.0005, call, item),
        _e("function_call", stop + 0.002, call),
        _e("response_create", stop + 0.090, answer),
        _e("response_created", stop + 0.0905, answer, item),
        _e("first_audio", stop + 0.093, answer),
    ]


GREETING = [_e("response_created", 4.9, "resp_greeting"), _e("first_audio", 5.0, "resp_greeting")]


def test_lexvoz_turn_overhead_is_everything_but_the_standin_answering() -> None:
    # The person stops speaking; the stand-in hears the end at 10.000 and its own response (a function call) is
    # out at 10.002; the worker runs the tool and asks for the answer at 10.090; the stand-in starts speaking it at
    # 10.093; the person hears it at 10.140.
    entries = [*GREETING, *_lexvoz_turn("item_1", 10.0, 1), *_lexvoz_turn("item_2", 20.0, 2)]
    split = split_turn(entries, 9.0, [5.05, 10.140, 20.2], next_spoke_at=19.0)
    assert isinstance(split, TurnSplit)
    assert split.total_s == pytest.approx(0.140)
    assert split.model_s == pytest.approx(0.002 + 0.003)
    assert split.overhead_s == pytest.approx(0.135)  # the tool round trip (88 ms) and the audio path (47 ms)
    assert split.audio_path_s == pytest.approx(0.047)
    assert split.before_audio_s == pytest.approx(0.088)


def test_bare_turn_overhead_is_the_audio_path_alone() -> None:
    # No tool: the stand-in answers the turn itself, and everything after its first audio is the agent side's.
    entries = [
        _e("speech_stopped", 3.0, item_id="item_1"),
        _e("response_created", 3.001, "resp_1", "item_1"),
        _e("first_audio", 3.004, "resp_1"),
    ]
    split = split_turn(entries, 2.0, [3.050])
    assert split == TurnSplit(
        total_s=pytest.approx(0.050), model_s=pytest.approx(0.004), audio_path_s=pytest.approx(0.046)
    )
    assert split.overhead_s == pytest.approx(0.046) and split.before_audio_s == pytest.approx(0.0)


def test_a_previous_answers_tail_heard_after_the_question_is_not_taken_for_its_answer() -> None:
    # The case that broke at 10 conversations on a saturated host: the last answer's audio was still in the room
    # when the person asked again, and a burst of it (after a stall in the room) reached the person at 10.050,
    # after this turn's speech_stopped (10.000) and before the stand-in wrote this turn's first audio (10.093).
    # The answer itself is heard at 10.140. The old matching took the first sound after the question (the tail)
    # as the answer's, found no first audio before it, and dropped the turn.
    entries = [*GREETING, *_lexvoz_turn("item_1", 10.0, 1)]
    split = split_turn(entries, 8.4, [5.05, 8.6, 10.050, 10.140])
    assert isinstance(split, TurnSplit)
    assert split.total_s == pytest.approx(0.140) and split.audio_path_s == pytest.approx(0.047)


def test_the_answer_is_found_by_the_standins_ids_not_by_what_came_first() -> None:
    # A response tied to the previous question (item_0) writes its first audio after this question's speech ended
    # and before this turn's answer: by time alone it would pass for the answer; by id it is not this turn's.
    entries = [
        _e("response_created", 9.9, "resp_late", "item_0"),
        _e("speech_stopped", 10.0, item_id="item_1"),
        _e("first_audio", 10.01, "resp_late"),
        _e("response_created", 10.001, "resp_1", "item_1"),
        _e("first_audio", 10.2, "resp_1"),
    ]
    split = split_turn(entries, 8.4, [10.05, 10.25])
    assert isinstance(split, TurnSplit)
    assert split.total_s == pytest.approx(0.25) and split.model_s == pytest.approx(0.2)


def test_an_onset_at_the_first_audio_counts_within_the_clock_tolerance_and_not_before() -> None:
    entries = [*_lexvoz_turn("item_1", 10.0, 1)]
    early = 10.093 - CLOCK_TOLERANCE_S / 2
    assert isinstance(split_turn(entries, 9.0, [early]), TurnSplit)
    assert split_turn(entries, 9.0, [10.093 - 2 * CLOCK_TOLERANCE_S]) == "no_onset"


def test_turns_that_cannot_be_split_say_why() -> None:
    turn = _lexvoz_turn("item_1", 10.0, 1)
    assert split_turn([*GREETING], 9.0, [10.2]) == "no_speech_stopped"
    # A speech_stopped before the question, or from the next question, is not this question's.
    assert split_turn(turn, 10.5, [10.2], next_spoke_at=11.0) == "no_speech_stopped"
    assert split_turn(turn, 8.0, [10.2], next_spoke_at=9.0) == "no_speech_stopped"
    # The stand-in never spoke for this speech (only the tool call), or only for another item.
    assert split_turn(turn[:3], 9.0, [10.2]) == "no_response"
    other = [_e("speech_stopped", 10.0, item_id="item_1"), *GREETING[:1], _e("first_audio", 10.1, "resp_greeting")]
    assert split_turn(other, 9.0, [10.2]) == "no_response"
    # One question heard as two turns: the first was cancelled unanswered by the second, which the answer is tied to.
    halves = [_e("speech_stopped", 9.6, item_id="item_0"), *turn]
    assert split_turn(halves, 9.0, [10.2]) == "several_turns"
    assert split_turn(halves, 9.7, [10.2]) != "several_turns"  # the first half was before this question
    # Nothing heard after the answer was written; or heard only too late, or only after the next answer was written.
    assert split_turn(turn, 9.0, [10.05]) == "no_onset"
    assert split_turn(turn, 9.0, [10.093 + ONSET_WITHIN_S + 1]) == "no_onset"
    assert split_turn(turn, 9.0, [12.0], within_s=1.0) == "no_onset"
    following = [*turn, _e("response_created", 11.0, "resp_next", "item_9"), _e("first_audio", 11.5, "resp_next")]
    assert split_turn(following, 9.0, [11.6]) == "no_onset"


def test_a_talk_is_matched_question_by_question_and_the_tally_counts_every_one() -> None:
    # Three questions: the first answered and heard, the second answered but its onset lost (it ran into the
    # tail before it), the third never reached the stand-in; the agent then spoke up by itself, heard at 30.0:
    # that is no answer to the second question, whose answer was written before it.
    by_itself = [_e("response_created", 29.8, "resp_nudge", "item_2"), _e("first_audio", 29.9, "resp_nudge")]
    entries = [*GREETING, *_lexvoz_turn("item_1", 10.0, 1), *_lexvoz_turn("item_2", 20.0, 2), *by_itself]
    talk = Talk(connection=1, spoke_at=[8.4, 18.4, 28.4], onsets=[5.05, 10.14, 30.0])
    outcomes = match_talk(entries, talk)
    assert isinstance(outcomes[0], TurnSplit) and outcomes[0].total_s == pytest.approx(0.14)
    assert outcomes[1:] == ["no_onset", "no_speech_stopped"]
    tally = Tally()
    tally.add_talk(entries, talk, turns=5)  # its talk ended on an error after three questions of five
    tally.merge(tally_of(["no_response"]))
    figures = tally.figures()
    assert figures["questions"] == 6 and figures["matched"] == 1
    assert figures["unmatched"] == {
        "no_speech_stopped": 1,
        "no_response": 1,
        "several_turns": 0,
        "no_onset": 1,
        "not_asked": 2,
    }
    assert set(figures["unmatched"]) == set(UNMATCHED_REASONS)


def tally_of(outcomes: list[TurnSplit | str]) -> Tally:
    tally = Tally()
    tally.add(outcomes)
    return tally


def test_every_onset_of_the_agents_voice_is_kept_and_a_stutter_is_not_one() -> None:
    watch = AgentAudioWatch(track=None)  # type: ignore[arg-type]  # frames are fed by hand
    rate, frame = 1000, 50  # 50 ms frames of 1 kHz audio keep the arithmetic readable
    clock = 100.0

    def play(*levels: int) -> None:
        """Frames whose samples are all at the given levels, in turn, each delivered when its last sample is in."""
        nonlocal clock
        for level in levels:
            clock += frame / rate
            watch.observe(np.full(frame, level, dtype=np.int16), rate, clock)

    play(*[1000] * 6)  # the watch starts while the agent is speaking: no silence seen before it, no onset
    play(0, 0)  # a 100 ms stall inside the same line
    play(1000, -1000)
    assert watch.onsets == []
    gap = round(ONSET_GAP_S * rate / frame)
    play(*[0] * gap)  # the line ends; the next one starts after the gap
    play(50, -99)  # quieter than the threshold: still silence
    mark = clock
    # The next line's first loud sample is the 21st of its frame: it reached us 29 samples before the frame did.
    clock += frame / rate
    watch.observe(np.array([0] * 20 + [1200] * 30, dtype=np.int16), rate, clock)
    assert watch.onsets == [(pytest.approx(mark + 0.021), 1200)]
    # A frame ending in silence counts that silence toward the next gap.
    clock += frame / rate
    watch.observe(np.array([900] * 10 + [0] * 40, dtype=np.int16), rate, clock)
    play(*[0] * (gap - 1))  # 40 + 200 ms: one frame short of the gap
    play(900)
    assert len(watch.onsets) == 1
    play(*[0] * gap, 700)
    assert len(watch.onsets) == 2 and watch.onsets[1][1] == 700


def test_the_standin_and_another_process_read_one_clock() -> None:
    # The benchmark sets the stand-in's times (its own process) against the person's (this one): the clock must be
    # the host's, not one per process.
    before = time.monotonic()
    out = subprocess.run([sys.executable, "-c", "import time; print(repr(time.monotonic()))"], capture_output=True)
    after = time.monotonic()
    assert before <= float(out.stdout) <= after
    assert TurnTimings().now() <= time.monotonic()


def test_summary_and_ratio_compare_the_overheads_and_the_audio_paths() -> None:
    lexvoz = summarize([TurnSplit(0.2, 0.01, 0.05)] * 3)
    bare = summarize([TurnSplit(0.06, 0.01, 0.05)] * 3)
    assert lexvoz["matched"] == 3 and lexvoz["overhead_p95_ms"] == pytest.approx(190.0)
    assert bare["overhead_p50_ms"] == pytest.approx(50.0)
    ratios = compare(lexvoz, bare)
    assert ratios["ratio_p50"] == pytest.approx(3.8) and ratios["ratio_p95"] == pytest.approx(3.8)
    assert ratios["audio_ratio_p50"] == pytest.approx(1.0)
    assert compare(lexvoz, summarize([]))["ratio_p95"] is None
    # Against the bare agent with a tool that answers at once: the framework's own tool turn is in both overheads.
    bare_tool = summarize([TurnSplit(0.16, 0.01, 0.05)] * 3)
    with_tool = compare(lexvoz, bare, bare_tool)
    assert with_tool["tool_ratio_p50"] == pytest.approx(1.267, abs=1e-3)
    assert with_tool["ratio_p50"] == pytest.approx(3.8)
    assert "tool_ratio_p95" not in ratios  # no tool rounds, no tool ratio


async def test_the_standin_reports_when_a_turn_ended_and_when_each_answer_went_out(http: aiohttp.ClientSession) -> None:
    async with RealtimeStandIn(speed=40.0, transcripts=["pregunta"]) as standin:
        base = f"http://127.0.0.1:{standin.port}"
        ws = await http.ws_connect(
            f"ws://127.0.0.1:{standin.port}/v1/realtime?model=gpt-realtime", headers={"Authorization": "Bearer k"}
        )
        client = RawClient(ws)
        await client.next("session.created")
        tools = [{"type": "function", "name": "search_panama_law"}]
        await client.send({"type": "session.update", "session": {"type": "realtime", "tools": tools}})
        await client.next("session.updated")
        await client.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm_silence(100)).decode()})
        before = time.monotonic()
        await standin.inject_user_turn("pregunta")
        done = await client.next("response.done")
        call = done["response"]["output"][0]
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "[]"}
        await client.send({"type": "conversation.item.create", "item": output})
        await client.next("conversation.item.added")
        await client.send({"type": "response.create"})
        created = await client.next("response.created")
        await client.next("response.output_audio.delta")
        after = time.monotonic()
        async with http.get(base + "/control/timings") as resp:
            body = await resp.json()
        await ws.close()
    kinds = [(e["kind"], e.get("response_id")) for e in body["entries"]]
    answer, call_response = created["response"]["id"], done["response"]["id"]
    assert kinds == [
        ("speech_stopped", None),
        ("response_created", call_response),
        ("function_call", call_response),
        ("response_create", answer),  # read off the socket before its response.created was written
        ("response_created", answer),
        ("first_audio", answer),  # once per response, not once per delta
    ]
    turn = body["entries"][0]["item_id"]
    # Both responses, the server's own and the one the client asked for after the tool, answer the turn's item.
    assert [e.get("item_id") for e in body["entries"] if e["kind"] == "response_created"] == [turn, turn]
    times = [e["at"] for e in body["entries"]]
    assert before <= times[0] <= times[1] <= times[2] <= times[3] <= times[4] <= times[5] <= after  # one clock
    assert {e["connection"] for e in body["entries"]} == {1} and body["connections"] == 1
    assert body["next"] == 6
    async with RealtimeStandIn() as empty:
        async with http.get(f"http://127.0.0.1:{empty.port}/control/timings?since=x") as resp:
            assert resp.status == 400


def test_a_response_is_tied_to_the_last_user_item_of_its_connection() -> None:
    timings = TurnTimings(clock=lambda: 1.0)

    def created(connection: int, response_id: str) -> None:
        timings.written(connection, {"type": "response.created", "response": {"id": response_id}})

    def added(connection: int, item_id: str, role: str) -> None:
        item = {"id": item_id, "type": "message", "role": role}
        timings.written(connection, {"type": "conversation.item.added", "item": item})

    created(1, "resp_greeting")  # nothing asked yet
    added(1, "item_spoken", "user")
    added(2, "item_other_connection", "user")
    created(1, "resp_call")
    added(1, "item_answer", "assistant")  # the agent's own items are not turns
    created(1, "resp_answer")
    added(1, "item_typed", "user")  # a typed question is a turn too
    created(1, "resp_typed")
    timings.forget(1)
    created(1, "resp_after_close")
    tied = [(e["response_id"], e.get("item_id")) for e in timings.since(0) if e["kind"] == "response_created"]
    assert tied == [
        ("resp_greeting", None),
        ("resp_call", "item_spoken"),
        ("resp_answer", "item_spoken"),
        ("resp_typed", "item_typed"),
        ("resp_after_close", None),
    ]


def test_the_timing_record_is_bounded_and_keeps_absolute_positions() -> None:
    clock = iter(range(100))
    timings = TurnTimings(clock=lambda: float(next(clock)), max_entries=3)
    for n in range(5):
        timings.written(1, {"type": "input_audio_buffer.speech_stopped", "item_id": f"item_{n}"})
    assert timings.total == 5
    assert [e["item_id"] for e in timings.since(0)] == ["item_2", "item_3", "item_4"]
    assert [e["item_id"] for e in timings.since(4)] == ["item_4"]
    assert timings.since(5) == []
