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


def test_clear_text_url_is_refused_before_any_request_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["http://search.example/mcp", "--timeout", "1"])
    out = capsys.readouterr()
    assert code == 2
    assert out.out == ""
    assert out.err.count("\n") == 1 and "refusing plain http://" in out.err


def test_user_info_is_refused_and_the_password_never_printed(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["https://admin:hunter2@search.example/mcp", "--token", "t0k-secret"])
    out = capsys.readouterr()
    assert code == 2
    assert "hunter2" not in out.out + out.err
    assert "t0k-secret" not in out.out + out.err


async def test_wrong_path_and_405_and_server_text_are_named() -> None:
    srv = FakeMcpServer()
    async with srv.running():
        code, report = await check(srv.url.replace("/mcp", "/nope"), None, "x", 5)
        assert code == 1
        assert report["contract"]["http_status"] == 404
        assert "check the path" in report["contract"]["detail"]
        srv.behaviour.call_faults = [405]
        srv.behaviour.fault_body = b"POST not allowed here"
        code, report = await check(srv.url, None, "x", 5)
    assert report["search"]["http_status"] == 405
    assert "405 Method Not Allowed" in report["search"]["detail"]
    assert report["search"]["server_said"] == "POST not allowed here"


async def test_each_dropped_source_is_listed_with_its_reason() -> None:
    srv = FakeMcpServer(FakeMcpBehaviour(output_schema={"type": "object"}))
    srv.behaviour.results = [
        synthetic_source(1, title="a\u202eb"),
        synthetic_source(2, official_source_url="https://x\\y.example/"),
        synthetic_source(3),
    ]
    async with srv.running():
        code, report = await check(srv.url, None, "x", 5)
    assert code == 0
    dropped = report["search"]["dropped"]
    assert len(dropped) == 2
    assert dropped[0].startswith("source 1: title") and "U+202E" in dropped[0]
    assert dropped[1].startswith("source 2: official_source_url") and "backslash" in dropped[1]


def test_cli_never_prints_the_token(capsys: pytest.CaptureFixture[str]) -> None:
    main(["http://127.0.0.1:9/mcp", "--timeout", "1", "--token", "t0k-secret"])
    out = capsys.readouterr()
    assert "t0k-secret" not in out.out + out.err
