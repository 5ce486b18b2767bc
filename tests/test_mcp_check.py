"""`python -m agent mcp-check`: exit 0 only when the contract holds and the search succeeds."""

from __future__ import annotations

import json

import pytest

from agent.mcp.check import check, main
from tests.mcp_fixture import FakeMcpBehaviour, FakeMcpServer, synthetic_source


async def test_conforming_server_passes_and_prints_sources() -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(results=[synthetic_source(1), synthetic_source(2)], token="t0k"))
    async with srv.running():
        code, report = await check(srv.url, "t0k", "consulta sintética", 5)
    assert code == 0
    assert report["contract"] == {"ok": True}
    assert [s["citation"] for s in report["search"]["sources"]] == [
        synthetic_source(1)["citation"],
        synthetic_source(2)["citation"],
    ]
    assert report["search"]["tool_duration_ms"] > 0


async def test_contract_difference_is_named_and_fails() -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(output_schema=None))
    async with srv.running():
        code, report = await check(srv.url, None, "x", 5)
    assert code == 1
    assert report["contract"]["error"] == "contract"
    assert "outputSchema is missing" in report["contract"]["detail"]


async def test_failed_search_fails() -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(is_error=True))
    async with srv.running():
        code, report = await check(srv.url, None, "x", 5)
    assert code == 1
    assert report["contract"] == {"ok": True}
    assert report["search"]["error"] == "tool_error"


async def test_wrong_token_is_an_auth_failure() -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(token="right"))
    async with srv.running():
        code, report = await check(srv.url, "wrong", "x", 5)
    assert code == 1
    assert report["contract"]["error"] == "auth"


def test_cli_prints_json_and_exit_code_for_a_dead_server(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["http://127.0.0.1:9/mcp", "--timeout", "1"])
    out = capsys.readouterr()
    assert code == 1
    assert json.loads(out.out)["contract"]["error"] == "transport"
    assert "FAILED (transport)" in out.err
