"""The embedded search server through the worker's own gateway and the `mcp-check` command.

This is what makes it interchangeable with any other contract server: if these pass, the worker
treats it exactly as it would treat LexLatam's.
"""

from __future__ import annotations

import pytest

from agent.gateway import GatewayError, GatewayOptions, McpGateway
from agent.mcp_check import check
from tests.test_panama_law import TOKEN, built_dir, constitution_bytes, searcher, server_url  # noqa: F401

QUESTION = "cual es el idioma oficial de la republica"


async def test_mcp_check_accepts_the_embedded_server(server_url: str) -> None:  # noqa: F811
    code, report = await check(f"{server_url}/mcp", TOKEN, QUESTION, 8)
    assert code == 0, report
    assert report["contract"] == {"ok": True}
    citations = [s["citation"] for s in report["search"]["sources"]]
    assert "Constitución Política de la República de Panamá, artículo 7" in citations
    assert all(len(s["excerpt"]) <= 750 for s in report["search"]["sources"])


async def test_gateway_searches_the_embedded_server(server_url: str) -> None:  # noqa: F811
    gw = McpGateway(GatewayOptions(url=f"{server_url}/mcp", token=TOKEN))
    try:
        result = await gw.search({"query": QUESTION})
        assert 1 <= len(result.sources) <= 3
        assert result.dropped == 0
        out_of_scope = await gw.search({"query": "receta de sancocho con otoe y culantro"})
    finally:
        await gw.aclose()
    assert out_of_scope.sources == []  # a valid "no sources" answer, not a failure


async def test_gateway_without_the_token_is_refused_as_auth(server_url: str) -> None:  # noqa: F811
    gw = McpGateway(GatewayOptions(url=f"{server_url}/mcp", token="wrong"))
    try:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": QUESTION})
    finally:
        await gw.aclose()
    assert info.value.kind == "auth"
