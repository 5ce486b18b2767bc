"""The embedded search server through the worker's own gateway and the `mcp-check` command.

This is what makes it interchangeable with any other contract server: if these pass, the worker
treats it exactly as it would treat LexLatam's.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from agent.mcp.check import check
from agent.mcp.gateway import GatewayError, GatewayOptions, McpGateway
from panama_law.index import disk as index
from panama_law.retrieve.search import Searcher
from tests.search_server import SERVER_TOKEN as TOKEN
from tests.search_server import serving

QUESTION = "cual es el idioma oficial de la republica"


async def test_mcp_check_accepts_the_embedded_server(server_url: str) -> None:
    code, report = await check(f"{server_url}/mcp", TOKEN, QUESTION, 8)
    assert code == 0, report
    assert report["contract"] == {"ok": True}
    citations = [s["citation"] for s in report["search"]["sources"]]
    assert "Constitución Política de la República de Panamá, artículo 7" in citations
    assert all(len(s["excerpt"]) <= 750 for s in report["search"]["sources"])


async def test_gateway_searches_the_embedded_server(server_url: str) -> None:
    gw = McpGateway(GatewayOptions(url=f"{server_url}/mcp", token=TOKEN))
    try:
        result = await gw.search({"query": QUESTION})
        assert 1 <= len(result.sources) <= 3
        assert result.dropped == 0
        out_of_scope = await gw.search({"query": "receta de sancocho con otoe y culantro"})
    finally:
        await gw.aclose()
    assert out_of_scope.sources == []  # a valid "no sources" answer, not a failure


async def test_gateway_without_the_token_is_refused_as_auth(server_url: str) -> None:
    gw = McpGateway(GatewayOptions(url=f"{server_url}/mcp", token="wrong"))
    try:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": QUESTION})
    finally:
        await gw.aclose()
    assert info.value.reason == "auth"


async def test_cancelled_call_is_cancelled_on_the_server(
    built_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The gateway's cancel (a new user turn) must stop the server's work, not just the client's wait."""
    monkeypatch.setenv("PANAMA_LAW_TEST_DELAY_MS", "3000")
    with serving(Searcher(index.load(built_dir))) as url:
        await _cancel_mid_search(url, caplog)


async def _cancel_mid_search(url: str, caplog: pytest.LogCaptureFixture) -> None:
    gw = McpGateway(GatewayOptions(url=f"{url}/mcp", token=TOKEN))
    try:
        with caplog.at_level(logging.INFO, logger="panama_law.serve.server"):
            await gw.connect()
            task = asyncio.create_task(gw.search({"query": QUESTION}))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(100):
                if "tool call cancelled" in caplog.text:
                    break
                await asyncio.sleep(0.02)
        assert "tool call cancelled" in caplog.text
        assert "results in" not in caplog.text  # the search never ran to the end
    finally:
        await gw.aclose()
