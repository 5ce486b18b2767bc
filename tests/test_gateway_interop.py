"""Interop with a foreign MCP implementation: the official TypeScript SDK on both sides.

A TypeScript server (tests/interop/server.mjs) in each shape a hosted search service may take
(stateful or stateless, SSE or JSON replies, an older protocol revision, no outputSchema, a reply that
breaks its own outputSchema) is driven through the gateway and `mcp-check`; the TypeScript client
(tests/interop/client.mjs) runs against the embedded panama_law server. `make interop-deps` installs
the SDK from tests/interop/package-lock.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.mcp.check import check
from agent.mcp.gateway import GatewayError
from tests.gateways import opened
from tests.search_server import SERVER_TOKEN as TOKEN

INTEROP = Path(__file__).parent / "interop"
SDK = INTEROP / "node_modules" / "@modelcontextprotocol" / "sdk"
NODE = shutil.which("node")
STARTUP_S = 20


@pytest.fixture(autouse=True)
def _interop_installed() -> None:
    if NODE is None:
        pytest.fail("node is required for the interop tests (Node.js >= 20)")
    if not SDK.is_dir():
        pytest.fail("the TypeScript MCP SDK is not installed: run `make interop-deps`")


@contextlib.asynccontextmanager
async def ts_server(*flags: str) -> AsyncIterator[str]:
    """Start server.mjs with `flags`; yields its MCP URL; stops it afterwards."""
    assert NODE is not None
    proc = await asyncio.create_subprocess_exec(
        NODE, "server.mjs", *flags, cwd=INTEROP, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), STARTUP_S)).decode()
        if not line.startswith("listening "):
            err = await proc.stderr.read() if proc.stderr else b""
            pytest.fail(f"the TypeScript server did not start: {line!r} {err.decode()[-500:]}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        if proc.returncode is None:
            proc.terminate()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 5)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


SHAPES = {
    "stateful-sse": (),
    "stateful-json": ("--json",),
    "stateless-sse": ("--stateless",),
    "stateless-json": ("--stateless", "--json"),
}


@pytest.mark.parametrize("flags", list(SHAPES.values()), ids=list(SHAPES))
async def test_gateway_searches_a_typescript_server(flags: tuple[str, ...]) -> None:
    async with ts_server(*flags, "--token", "ts-token") as url, opened(url, token="ts-token") as gw:
        first = await gw.search({"query": "libertad de expresión"})
        second = await gw.search({"query": "derecho de reunión"})
        assert gw.connects == 1
    assert [s.citation for s in first.sources] == ["Ley Sintética TS, artículo 1", "Ley Sintética TS, artículo 2"]
    assert second.sources


async def test_gateway_accepts_an_older_protocol_revision() -> None:
    async with ts_server("--old-protocol") as url, opened(url) as gw:
        await gw.search({"query": "uno"})
        conn = gw.connection
        assert conn is not None
        assert conn.protocol_version == "2025-03-26"


async def test_missing_output_schema_is_a_contract_failure_in_mcp_check() -> None:
    async with ts_server("--no-output-schema") as url:
        code, report = await check(url, None, "uno", 5)
    assert code == 1
    assert report["contract"]["error"] == "contract"
    assert "outputSchema is missing" in report["contract"]["detail"]


async def test_reply_breaking_its_own_output_schema_is_invalid_result_once() -> None:
    async with ts_server("--bad-output") as url, opened(url) as gw:
        with pytest.raises(GatewayError) as info:
            await gw.search({"query": "uno"})
        assert gw.connects == 1
    assert info.value.reason == "invalid_result"


@pytest.mark.parametrize("flags", [(), ("--stateless", "--json")], ids=["stateful-sse", "stateless-json"])
async def test_mcp_check_passes_a_typescript_server(flags: tuple[str, ...]) -> None:
    async with ts_server(*flags) as url:
        code, report = await check(url, None, "uno", 5)
    assert code == 0, report
    assert len(report["search"]["sources"]) == 2


async def test_wrong_token_against_a_typescript_server_is_auth() -> None:
    async with ts_server("--token", "right") as url:
        code, report = await check(url, "wrong", "uno", 5)
    assert code == 1
    assert report["contract"]["error"] == "auth"
    assert report["contract"]["server_said"] == '{"error":"unauthorized"}'


async def test_typescript_client_searches_the_embedded_server(server_url: str) -> None:
    assert NODE is not None
    proc = await asyncio.create_subprocess_exec(
        NODE,
        "client.mjs",
        f"{server_url}/mcp",
        "cual es el idioma oficial de la republica",
        TOKEN,
        cwd=INTEROP,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-1000:]
    report = json.loads(out)
    assert [t["name"] for t in report["tools"]] == ["search_panama_law"]
    assert "outputSchema" in report["tools"][0]
    citations = [s["citation"] for s in report["result"]["structuredContent"]["results"]]
    assert "Constitución Política de la República de Panamá, artículo 7" in citations
    assert not report["result"].get("isError")
