"""One MCP session per worker process, shared by conversations that run on different event loops.

With the thread executor every job has its own thread and event loop in one process; the gateway lives
on a loop thread of its own and every conversation calls it from wherever it runs.
"""

from __future__ import annotations

import asyncio
import threading

from agent.mcp.gateway import GatewayOptions
from agent.mcp.shared import SharedGateway
from tests.mcp_fixture import FakeMcpServer, synthetic_source


def _options(url: str) -> GatewayOptions:
    return GatewayOptions(url=url, call_timeout_s=8, connect_timeout_s=5, retry_delay_s=0.01)


async def test_conversations_on_other_event_loops_share_one_mcp_session(server: FakeMcpServer) -> None:
    server.behaviour.results = [synthetic_source(1)]
    shared = SharedGateway(_options(server.url))
    results: list[str] = []
    errors: list[BaseException] = []

    def job(n: int) -> None:  # what a job thread does: its own loop, the process's gateway
        async def ask() -> None:
            result = await shared.search({"query": f"pregunta {n}"})
            results.append(result.sources[0].citation)

        try:
            asyncio.run(ask())
        except BaseException as exc:
            errors.append(exc)

    try:
        threads = [threading.Thread(target=job, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        await asyncio.gather(*(asyncio.to_thread(t.join, 20) for t in threads))
        assert errors == []
        assert results == [synthetic_source(1)["citation"]] * 3
        assert server.methods.count("initialize") == 1  # one MCP session for the three conversations
        assert shared.gateway.connects == 1
    finally:
        await shared.aclose()


async def test_cancelling_the_caller_cancels_the_call_on_the_server(server: FakeMcpServer) -> None:
    server.behaviour.delay_s = 5.0
    shared = SharedGateway(_options(server.url))
    try:
        search = server.next_call()
        call = asyncio.create_task(shared.search({"query": "pregunta lenta"}))
        await asyncio.wait_for(search.started.wait(), 10)
        call.cancel()  # a barge-in on the conversation's loop
        await asyncio.wait_for(search.cancelled.wait(), 5)
        assert server.cancel_notifications == 1
    finally:
        await shared.aclose()


async def test_the_last_conversation_out_closes_the_session(server: FakeMcpServer) -> None:
    server.behaviour.results = [synthetic_source(1)]
    shared = SharedGateway(_options(server.url))
    try:
        shared.acquire()
        shared.acquire()
        await shared.search({"query": "uno"})
        await shared.release("job shutdown")
        assert server.delete_requests == 0 and shared.connected  # another conversation still uses it
        await shared.release("job shutdown")
        assert server.delete_requests == 1 and not shared.connected
        await shared.search({"query": "dos"})  # the next conversation opens it again
        assert server.methods.count("initialize") == 2
    finally:
        await shared.aclose()
