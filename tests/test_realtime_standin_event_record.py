"""The stand-in's bounded records: what tests read stays readable, by positions that never move.

A closed connection's events and timings are forgotten once enough newer connections have closed,
and a record drops its oldest entries past its size; readers' places (``after=``, ``mark()``,
``/control/events?since=``, ``/control/timings?since=``) are absolute, so forgetting moves none.
"""

from __future__ import annotations

import aiohttp
import pytest

from realtime_standin import RealtimeStandIn
from realtime_standin.endpoint import KEEP_CLOSED_CONNECTIONS
from realtime_standin.event_record import EventRecord
from tests.standin_helpers import STANDIN_APPENDS, hold_conversation, wait_until_settled

ROUNDS = 2 * KEEP_CLOSED_CONNECTIONS + 4


async def test_the_latest_connections_stay_readable_by_absolute_position(http: aiohttp.ClientSession) -> None:
    async with RealtimeStandIn(speed=100.0, ms_per_char=1) as standin:
        for n in range(ROUNDS):
            await hold_conversation(http, standin, n)
        await wait_until_settled(standin)
        per_conversation = 3 + STANDIN_APPENDS + 4  # session.update x3, the appends, two items, two response.create
        assert len(standin.received) == ROUNDS * per_conversation  # positions count every event ever
        assert len(standin.client_events("response.create")) == 2 * KEEP_CLOSED_CONNECTIONS
        last = standin.client_events("input_audio_buffer.append")[-1]
        assert last["event_id"] == f"ev_{ROUNDS - 1}_{STANDIN_APPENDS - 1}"
        assert standin.received[standin.received.index(last)] == last

        received, sent = standin.mark()
        await hold_conversation(http, standin, 99)
        await wait_until_settled(standin)
        update = await standin.wait_for_client_event("session.update", after=received)
        assert standin.received.index(update) == received
        assert (await standin.wait_for_server_event("session.created", after=sent))["type"] == "session.created"
        async with http.get(f"http://127.0.0.1:{standin.port}/control/events?since={received}") as resp:
            summaries = await resp.json()
        assert len(summaries) == per_conversation and summaries[0]["type"] == "session.update"
        async with http.get(f"http://127.0.0.1:{standin.port}/control/timings") as resp:
            timings = await resp.json()
        latest = ROUNDS + 1
        assert timings["connections"] == latest  # the latest connection's number, as before
        assert {e["connection"] for e in timings["entries"]} == set(
            range(latest + 1 - KEEP_CLOSED_CONNECTIONS, latest + 1)
        )


def test_an_event_record_forgets_by_connection_and_by_age_without_moving_positions() -> None:
    record = EventRecord(max_entries=5)
    for n in range(4):
        record.append({"n": n}, connection=n % 2)
    record.forget(0)
    assert list(record) == [{"n": 1}, {"n": 3}] and len(record) == 4 and record.kept == 2
    assert record[3] == {"n": 3} and record[-1] == {"n": 3} and record[1:] == [{"n": 1}, {"n": 3}]
    assert record.index({"n": 3}) == 3
    with pytest.raises(IndexError):
        record[2]  # forgotten
    for n in range(4, 10):
        record.append({"n": n}, connection=1)
    assert [pos for pos, _ in record.since(0)] == [5, 6, 7, 8, 9]  # the oldest went past max_entries
    assert record[7:9] == [{"n": 7}, {"n": 8}]
