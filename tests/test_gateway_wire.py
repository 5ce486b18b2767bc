"""The gateway on the wire: no standalone GET stream, SSE and JSON replies, the reply byte cap, HTTP errors."""

from __future__ import annotations

import pytest

from agent.mcp.gateway import GatewayError
from tests.gateways import opened
from tests.mcp_fixture import FakeMcpBehaviour, FakeMcpServer, synthetic_source


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
async def test_connects_and_searches_when_posts_stall_while_a_get_stream_is_open(json_response: bool) -> None:
    """LexLatam's endpoint stalls every POST once a GET stream is open; the gateway never opens one."""
    srv = FakeMcpServer(FakeMcpBehaviour(stall_posts_while_get_open=True), json_response=json_response)
    async with srv.running(), opened(srv.url, connect_timeout_s=3.0, call_timeout_s=3.0) as gw:
        result = await gw.search({"query": "derecho sintético"})
        assert result.sources
        conn = gw.connection
        assert conn is not None
        answered_locally = conn.transport.get_requests_answered
    assert srv.get_requests == 0
    assert answered_locally >= 1  # the SDK asked for the stream; the transport said 405 itself


async def test_reply_over_the_byte_cap_is_invalid_result_without_retry_or_reconnect() -> None:
    big = synthetic_source(1, excerpt="x" * 700)
    srv = FakeMcpServer(FakeMcpBehaviour(results=[big] * 200, output_schema={"type": "object"}))
    async with srv.running(), opened(srv.url, max_reply_bytes=16_384) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
        assert gw.connects == 1
    assert info.value.reason == "invalid_result"
    assert "16384 bytes" in info.value.detail
    assert srv.tool_calls_started == 1


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
async def test_reply_within_the_cap_is_read_in_both_reply_formats(json_response: bool) -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(results=[synthetic_source(1)] * 3), json_response=json_response)
    async with srv.running(), opened(srv.url, max_reply_bytes=16_384) as gw:
        result = await gw.search({"query": "uno"})
    assert len(result.sources) == 3


async def test_server_error_text_is_kept_and_4xx_is_not_retried() -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(fault_body=b"consulta rechazada: cuota agotada\n"))
    async with srv.running(), opened(srv.url) as gw:
        await gw.connect()
        srv.behaviour.call_faults = [429, 429]
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
    assert info.value.status == 429
    assert info.value.server_text == "consulta rechazada: cuota agotada"
    assert "cuota agotada" in info.value.detail
    assert srv.tool_call_posts == 1


async def test_wrong_path_is_named_as_such_not_as_a_lost_session() -> None:
    srv = FakeMcpServer()
    async with srv.running(), opened(srv.url.replace("/mcp", "/wrong")) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.connect()
    assert info.value.status == 404
    assert "check the path" in info.value.detail
    assert "session" not in info.value.detail


async def test_missing_token_is_not_reported_as_refused_credentials() -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(token="right"))
    async with srv.running(), opened(srv.url) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.connect()
    assert info.value.reason == "auth"
    assert "no token is configured" in info.value.detail
    assert "refused our credentials" not in info.value.detail


async def test_the_token_is_never_echoed_back_from_an_error_body() -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(fault_body=b"bad token s3cret-token-value"))
    async with srv.running(), opened(srv.url, token="s3cret-token-value") as gw:
        await gw.connect()
        srv.behaviour.call_faults = [400]
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
    assert "s3cret-token-value" not in str(info.value.detail) + str(info.value.server_text)
