"""What the stand-in keeps stays bounded however many conversations it serves.

The stand-in runs for hours under the soak benchmark and in rehearsal mode, one connection per
conversation; it used to keep every event, connection and timing it had ever seen, so its memory
grew with every conversation. Here raw clients hold the plugin's conversation again and again, and
what the stand-in holds afterwards is counted: after twice as many conversations it holds the same.
"""

from __future__ import annotations

import gc

import aiohttp

from realtime_standin import RealtimeStandIn
from realtime_standin.session import RealtimeConnection
from tests.standin_helpers import hold_conversation, wait_until_settled

ROUNDS = 12  # more closed connections than the stand-in keeps readable: a second batch must replace the first


async def serve(http: aiohttp.ClientSession, standin: RealtimeStandIn, first: int) -> dict[str, int]:
    """Hold ``ROUNDS`` conversations one after another; then count what the stand-in holds."""
    for n in range(first, first + ROUNDS):
        await hold_conversation(http, standin, n)
    await wait_until_settled(standin)
    gc.collect()
    return {
        "received events": sum(1 for _ in standin.received),
        "sent events": sum(1 for _ in standin.sent),
        "timing entries": len(standin.timings.since(0)),
        "connections": len(standin.connections),
        "connection objects alive": sum(1 for o in gc.get_objects() if isinstance(o, RealtimeConnection)),
        "input audio bytes": sum(len(c._audio_buffer) for c in standin.connections),
    }


async def test_what_the_standin_keeps_does_not_grow_with_the_conversations_it_served(
    http: aiohttp.ClientSession,
) -> None:
    async with RealtimeStandIn(speed=100.0, ms_per_char=1) as standin:
        after_one_batch = await serve(http, standin, 0)
        after_two_batches = await serve(http, standin, ROUNDS)
    assert after_two_batches == after_one_batch
    assert after_one_batch["connections"] < ROUNDS  # the oldest closed connections are let go
    assert after_one_batch["input audio bytes"] == 0  # a closed connection will never commit a turn
