"""The gateway against a real `mcp` SDK server over HTTP: contract, rules, faults, breaker."""

from __future__ import annotations

import asyncio
import time

import pytest

from agent.contract import TOOL_NAME
from agent.mcp.breaker import BreakerOptions
from agent.mcp.gateway import GatewayError, GatewayOptions, McpGateway
from tests.gateways import make_gateway, opened
from tests.mcp_fixture import FakeMcpBehaviour, FakeMcpServer, synthetic_source


async def test_search_returns_validated_sources(server: FakeMcpServer) -> None:
    server.behaviour.results = [synthetic_source(1, unknown_field="x", date="2004-11-15")]
    async with opened(server.url) as gw:
        result = await gw.search({"query": "  derecho sintético  "})
    assert [s.citation for s in result.sources] == ["Ley Sintética de Prueba, artículo 1"]
    assert result.sources[0].public_dict().keys() == {"title", "citation", "excerpt", "date"}
    assert server.queries == ["derecho sintético"]  # trimmed before sending
    assert result.duration_ms > 0


async def test_one_session_is_reused_across_calls(server: FakeMcpServer) -> None:
    async with opened(server.url) as gw:
        await asyncio.gather(*(gw.search({"query": f"q{i}"}) for i in range(5)))
        await gw.search({"query": "again"})
    assert gw.connects == 1
    assert server.tool_calls_started == 6


async def test_bearer_token_on_every_request(server: FakeMcpServer) -> None:
    server.behaviour.token = "s3cret"
    async with opened(server.url, token="s3cret") as gw:
        await gw.search({"query": "uno"})
        await gw.search({"query": "dos"})
    assert server.auth_headers == ["Bearer s3cret", "Bearer s3cret"]


async def test_auth_failure_makes_exactly_one_request_and_no_retry(server: FakeMcpServer) -> None:
    async with opened(server.url, token="right") as gw:
        await gw.connect()
        server.behaviour.call_faults = [401, 401, 401]
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
    assert info.value.reason == "auth"
    assert server.tool_call_posts == 1
    assert server.auth_headers == ["Bearer right"]  # never an anonymous retry


async def test_auth_failure_at_connect_is_reported_as_auth(server: FakeMcpServer) -> None:
    server.behaviour.token = "right"
    async with opened(server.url, token="wrong") as gw:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
    assert info.value.reason == "auth"
    assert gw.connects == 1


async def test_transient_5xx_is_retried_once(server: FakeMcpServer) -> None:
    async with opened(server.url) as gw:
        await gw.connect()
        server.behaviour.call_faults = [503]
        result = await gw.search({"query": "uno"})
        assert result.attempts == 2
        server.behaviour.call_faults = [502, 502, 502]
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "dos"})
    assert info.value.reason == "transport"
    assert server.tool_call_posts == 2 + 2  # one retry each, never more


async def test_timeout_is_final_cancelled_and_answered_within_the_deadline(server: FakeMcpServer) -> None:
    server.behaviour.delay_s = 5.0
    async with opened(server.url, call_timeout_s=0.5) as gw:
        await gw.connect()
        search = server.next_call()
        started = time.perf_counter()
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "lento"})
        elapsed = time.perf_counter() - started
        await asyncio.wait_for(search.cancelled.wait(), 5)
    assert info.value.reason == "timeout"
    assert elapsed < 0.5 + 0.25  # the deadline, with no second attempt
    assert server.tool_calls_started == 1
    assert server.cancel_notifications == 1


async def test_dead_server_is_a_transport_error_and_reconnects_when_back() -> None:
    srv = FakeMcpServer()
    async with opened(srv.url) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
        assert info.value.reason == "transport"
        async with srv.running():
            result = await gw.search({"query": "dos"})
            assert result.sources


async def test_server_restart_mid_session_reconnects() -> None:
    srv = FakeMcpServer()
    async with opened(srv.url) as gw:
        async with srv.running():
            await gw.search({"query": "uno"})
        srv2 = FakeMcpServer()
        srv2.port = srv.port
        async with srv2.running():
            result = await gw.search({"query": "dos"})
        assert result.sources
        assert srv2.tool_calls_started == 1


@pytest.mark.parametrize(
    ("behaviour", "needle"),
    [
        (FakeMcpBehaviour(tool_name="buscar"), "has no tool 'search_panama_law'"),
        (FakeMcpBehaviour(output_schema=None), "outputSchema is missing"),
        (
            FakeMcpBehaviour(input_schema={"type": "object", "properties": {"q": {"type": "string"}}}),
            "no 'query' property",
        ),
        (
            FakeMcpBehaviour(
                input_schema={
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "k": {"type": "integer"}},
                    "required": ["query", "k"],
                }
            ),
            "required fields",
        ),
        (
            FakeMcpBehaviour(input_schema={"type": "object", "properties": {"query": {"type": "integer"}}}),
            "expected 'string'",
        ),
    ],
)
async def test_contract_mismatch_is_refused_naming_the_difference(behaviour: FakeMcpBehaviour, needle: str) -> None:
    srv = FakeMcpServer(behaviour)
    async with srv.running():
        gw = make_gateway(srv.url)
        try:
            with pytest.raises(GatewayError) as info:
                await gw.search({"query": "uno"})
        finally:
            await gw.aclose()
    assert info.value.reason == "contract"
    assert needle in info.value.detail
    assert srv.tool_calls_started == 0


async def test_other_tool_names_are_never_sent(server: FakeMcpServer) -> None:
    server.behaviour.extra_tools = ["delete_everything"]
    async with opened(server.url) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"}, tool_name="delete_everything")
    assert info.value.reason == "invalid_arguments"
    assert server.tool_call_posts == 0


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"query": "   "},
        {"query": 42},
        {"query": "x" * 2001},
        {"query": "ok", "k": 3},
        ["query"],
        None,
    ],
)
async def test_bad_arguments_never_reach_the_server(server: FakeMcpServer, arguments: object) -> None:
    async with opened(server.url) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.search(arguments)
    assert info.value.reason == "invalid_arguments"
    assert server.tool_call_posts == 0


async def test_is_error_is_a_failure_even_on_http_200(server: FakeMcpServer) -> None:
    server.behaviour.is_error = True
    async with opened(server.url) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
    assert info.value.reason == "tool_error"
    assert server.tool_calls_started == 1  # not retried


async def test_empty_results_are_a_valid_no_sources_answer(server: FakeMcpServer) -> None:
    server.behaviour.results = []
    async with opened(server.url) as gw:
        result = await gw.search({"query": "nada"})
    assert result.sources == []


async def test_only_invalid_sources_fail_the_search(server: FakeMcpServer) -> None:
    server.behaviour.output_schema = {"type": "object"}  # let bad items past the SDK's own check
    server.behaviour.results = [{"title": "sin cita"}, synthetic_source(2, official_source_url="javascript:alert(1)")]
    async with opened(server.url) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
    assert info.value.reason == "invalid_result"


async def test_breaker_opens_after_three_failures_and_fails_fast() -> None:
    now = [0.0]
    srv = FakeMcpServer()
    gw = McpGateway(
        GatewayOptions(
            url=srv.url,
            call_timeout_s=1,
            connect_timeout_s=1,
            retry_delay_s=0.0,
            breaker=BreakerOptions(failure_threshold=3, reset_timeout_s=30),
        ),
        clock=lambda: now[0],
    )
    try:
        async with srv.running():
            await gw.connect()
            srv.behaviour.is_error = True
            for _ in range(3):
                with pytest.raises(GatewayError):
                    await gw.search({"query": "uno"})
            assert srv.tool_calls_started == 3
            with pytest.raises(GatewayError) as info:
                await gw.search({"query": "dos"})
            assert info.value.reason == "circuit_open"
            assert srv.tool_calls_started == 3  # failed fast, nothing sent
            now[0] = 31.0
            srv.behaviour.is_error = False
            result = await gw.search({"query": "tres"})  # the one trial call
            assert result.sources
            assert gw.breaker.state.name == "CLOSED"
    finally:
        await gw.aclose()


async def test_cancelling_a_search_sends_notifications_cancelled(server: FakeMcpServer) -> None:
    server.behaviour.delay_s = 5.0
    async with opened(server.url, call_timeout_s=8.0) as gw:
        await gw.connect()
        search = server.next_call()
        task = asyncio.create_task(gw.search({"query": "lento"}))
        await asyncio.wait_for(search.started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(search.cancelled.wait(), 5)
        assert server.cancel_notifications == 1
        assert server.cancelled_calls == 1
        assert gw.breaker.state.name == "CLOSED"
        server.behaviour.delay_s = 0
        assert (await gw.search({"query": "después"})).sources  # the session survived the cancel


def test_tool_name_constant() -> None:
    assert TOOL_NAME == "search_panama_law"
