"""Classification, retries, the URL policy, audit and query minimisation."""

from __future__ import annotations

import logging

import pytest

from agent.contract import EndpointRefused
from agent.mcp.gateway import GatewayError, GatewayOptions
from agent.ops import metrics
from tests.gateways import opened
from tests.mcp_fixture import FakeMcpBehaviour, FakeMcpServer, synthetic_source

STRICT_SCHEMA = {
    "type": "object",
    "properties": {"results": {"type": "array"}},
    "required": ["results"],
    "additionalProperties": False,  # what zod servers advertise
}


async def test_reply_breaking_the_servers_own_output_schema_is_invalid_result_in_one_call() -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(output_schema=STRICT_SCHEMA))
    srv.behaviour.structured = {"results": [synthetic_source(1)], "score": 0.9}
    async with srv.running(), opened(srv.url) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
        assert gw.connects == 1  # no reconnect
    assert info.value.reason == "invalid_result"
    assert "outputSchema" in info.value.detail
    assert srv.tool_calls_started == 1  # no second call


async def test_unsupported_protocol_version_is_contract_in_the_sdks_own_words() -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(force_protocol_version="1999-01-01"))
    async with srv.running(), opened(srv.url) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.connect()
    assert info.value.reason == "contract"
    assert "Unsupported protocol version from the server: 1999-01-01" in info.value.detail


async def test_connection_refused_is_retried_once_after_the_delay() -> None:
    srv = FakeMcpServer()
    async with opened(srv.url) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
    assert info.value.reason == "transport"
    assert info.value.retryable
    assert "connection refused" in info.value.detail


@pytest.mark.parametrize(
    "url",
    [
        "http://search.example/mcp",
        "http://10.0.0.5:8765/mcp",
        "https://user:hunter2@search.example/mcp",
        "ftp://search.example/mcp",
    ],
)
def test_url_policy_refuses_clear_text_and_user_info_before_any_request(url: str) -> None:
    with pytest.raises(EndpointRefused) as info:
        GatewayOptions(url=url)
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "hosts"),
    [
        ("https://search.example/mcp", ()),
        ("http://127.0.0.1:8765/mcp", ()),
        ("http://localhost:8765/mcp", ()),
        ("http://[::1]:8765/mcp", ()),
        ("http://search:8765/mcp", ("search",)),
    ],
)
def test_url_policy_allows_https_loopback_and_listed_hosts(url: str, hosts: tuple[str, ...]) -> None:
    assert GatewayOptions(url=url, insecure_hosts=hosts).url == url


async def test_identity_numbers_phones_and_emails_are_masked_before_the_query_leaves() -> None:
    srv = FakeMcpServer()
    query = "mi cédula es 8-123-4567, correo ana@example.com, teléfono 6123-4567: ¿me pueden despedir?"
    async with srv.running(), opened(srv.url) as gw:
        result = await gw.search({"query": query})
        assert gw.query_as_sent({"query": query}) == result.query_sent
    sent = srv.queries[0]
    for secret in ("8-123-4567", "ana@example.com", "6123-4567"):
        assert secret not in sent
    assert "¿me pueden despedir?" in sent
    assert result.query_sent == sent


async def test_masking_can_be_turned_off() -> None:
    srv = FakeMcpServer()
    async with srv.running(), opened(srv.url, mask_queries=False) as gw:
        await gw.search({"query": "cédula 8-123-4567"})
    assert srv.queries == ["cédula 8-123-4567"]


async def test_connect_reconnect_and_disconnect_are_logged_with_reason_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def count(event: str) -> float:
        return metrics.mcp_connection_events_total.labels(event=event)._value.get()

    before = {e: count(e) for e in ("connect", "reconnect", "disconnect")}
    caplog.set_level(logging.INFO, logger="lexvoz.gateway")
    srv = FakeMcpServer()
    async with opened(srv.url) as gw:
        async with srv.running():
            await gw.search({"query": "uno"})
        srv2 = FakeMcpServer()
        srv2.port = srv.port
        async with srv2.running():
            await gw.search({"query": "dos"})
    text = caplog.text
    assert "MCP session opened to http://127.0.0.1" in text
    assert "MCP session reopened" in text and "after:" in text
    assert "closed: shutdown" in text
    assert "uno" not in text and "dos" not in text  # never the query
    assert count("connect") == before["connect"] + 1
    assert count("reconnect") == before["reconnect"] + 1
    assert count("disconnect") >= before["disconnect"] + 2


async def test_partly_invalid_reply_is_logged_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    before = metrics.mcp_partial_results_total._value.get()
    srv = FakeMcpServer(FakeMcpBehaviour(output_schema={"type": "object"}))
    srv.behaviour.results = [{"title": "sin cita"}, synthetic_source(2)]
    async with srv.running(), opened(srv.url) as gw:
        result = await gw.search({"query": "uno"})
    assert result.dropped == 1
    assert result.drop_reasons == ["source 1: citation: Field required"]
    assert "partly invalid" in caplog.text and "source 1: citation" in caplog.text
    assert metrics.mcp_partial_results_total._value.get() == before + 1


async def test_closing_the_gateway_ends_the_server_session() -> None:
    srv = FakeMcpServer()
    async with srv.running():
        async with opened(srv.url) as gw:
            await gw.search({"query": "uno"})
        assert srv.delete_requests == 1
