"""The voice-to-voice overhead benchmark's arithmetic (`bench/latency.py`) and the stand-in's timing record it
subtracts: the stand-in's own time must come out of the figure, and nothing else."""

from __future__ import annotations

import base64
import time
from typing import Any

import aiohttp
import pytest

from bench.latency import TurnSplit, compare, split_turn, summarize
from realtime_standin import RealtimeStandIn
from tests.standin_helpers import RawClient, pcm_silence


def _e(kind: str, at: float, response_id: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"connection": 1, "kind": kind, "at": at}
    if response_id is not None:
        entry["response_id"] = response_id
    return entry


def test_lexvoz_turn_overhead_is_everything_but_the_standin_answering() -> None:
    # The person stops speaking; the stand-in hears the end at 10.000 and its own response (a function call) is
    # out at 10.002; the worker runs the tool and asks for the answer at 10.090; the stand-in starts speaking it at
    # 10.093; the person hears it at 10.140.
    entries = [
        _e("first_audio", 5.0, "resp_greeting"),  # the greeting, before this turn
        _e("speech_stopped", 10.000),
        _e("function_call", 10.002, "resp_call"),
        _e("response_create", 10.090, "resp_answer"),
        _e("first_audio", 10.093, "resp_answer"),
        _e("speech_stopped", 20.0),  # a later turn
    ]
    split = split_turn(entries, spoke_at=9.0, heard_at=10.140)
    assert split is not None
    assert split.total_s == pytest.approx(0.140)
    assert split.model_s == pytest.approx(0.002 + 0.003)
    assert split.overhead_s == pytest.approx(0.135)  # the tool round trip (88 ms) and the audio path (47 ms)
    assert split.audio_path_s == pytest.approx(0.047)
    assert split.before_audio_s == pytest.approx(0.088)


def test_bare_turn_overhead_is_the_audio_path_alone() -> None:
    # No tool: the stand-in answers the turn itself, and everything after its first audio is the agent side's.
    entries = [_e("speech_stopped", 3.0), _e("first_audio", 3.004, "resp_1")]
    split = split_turn(entries, spoke_at=2.0, heard_at=3.050)
    assert split == TurnSplit(
        total_s=pytest.approx(0.050), model_s=pytest.approx(0.004), audio_path_s=pytest.approx(0.046)
    )
    assert split.overhead_s == pytest.approx(0.046) and split.before_audio_s == pytest.approx(0.0)


def test_a_turn_the_standin_never_answered_is_not_attributed() -> None:
    assert split_turn([_e("speech_stopped", 3.0)], spoke_at=2.0, heard_at=3.5) is None
    assert split_turn([_e("speech_stopped", 1.0), _e("first_audio", 1.1, "r")], spoke_at=2.0, heard_at=3.5) is None


def test_summary_and_ratio_compare_the_overheads_and_the_audio_paths() -> None:
    lexvoz = summarize([TurnSplit(0.2, 0.01, 0.05)] * 3)
    bare = summarize([TurnSplit(0.06, 0.01, 0.05)] * 3)
    assert lexvoz["turns"] == 3 and lexvoz["overhead_p95_ms"] == pytest.approx(190.0)
    assert bare["overhead_p50_ms"] == pytest.approx(50.0)
    ratios = compare(lexvoz, bare)
    assert ratios["ratio_p50"] == pytest.approx(3.8) and ratios["ratio_p95"] == pytest.approx(3.8)
    assert ratios["audio_ratio_p50"] == pytest.approx(1.0)
    assert compare(lexvoz, summarize([]))["ratio_p95"] is None


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
    answer = created["response"]["id"]
    assert kinds == [
        ("speech_stopped", None),
        ("function_call", done["response"]["id"]),
        ("response_create", answer),
        ("first_audio", answer),  # once per response, not once per delta
    ]
    times = [e["at"] for e in body["entries"]]
    assert before <= times[0] <= times[1] <= times[2] <= times[3] <= after  # the host's one monotonic clock
    assert {e["connection"] for e in body["entries"]} == {1} and body["connections"] == 1
    assert body["next"] == 4
    async with RealtimeStandIn() as empty:
        async with http.get(f"http://127.0.0.1:{empty.port}/control/timings?since=x") as resp:
            assert resp.status == 400


def test_the_timing_record_is_bounded_and_keeps_absolute_positions() -> None:
    from realtime_standin.timings import TurnTimings

    clock = iter(range(100))
    timings = TurnTimings(clock=lambda: float(next(clock)), max_entries=3)
    for n in range(5):
        timings.written(1, {"type": "input_audio_buffer.speech_stopped", "item_id": f"item_{n}"})
    assert timings.total == 5
    assert [e["item_id"] for e in timings.since(0)] == ["item_2", "item_3", "item_4"]
    assert [e["item_id"] for e in timings.since(4)] == ["item_4"]
    assert timings.since(5) == []
