"""`python -m agent mcp-check URL`: does this MCP server satisfy our search_panama_law contract?

For teams pointing Lexvoz at their own search service: the same gateway the worker uses connects,
checks the tool, runs one search, and prints what the model and the page would receive.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from agent.mcp.gateway import GatewayError, GatewayOptions, McpGateway

DEFAULT_QUERY = "¿Cuál es el idioma oficial de la República de Panamá?"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m agent mcp-check", description=__doc__.splitlines()[0])
    p.add_argument("url", help="the server's streamable HTTP endpoint, e.g. http://127.0.0.1:8765/mcp")
    p.add_argument("--token", default=None, help="bearer token, if the server wants one")
    p.add_argument("--query", default=DEFAULT_QUERY, help="the test search")
    p.add_argument("--timeout", type=float, default=8.0, help="per-call timeout in seconds")
    return p


async def check(url: str, token: str | None, query: str, call_timeout_s: float) -> tuple[int, dict[str, Any]]:
    gw = McpGateway(
        GatewayOptions(url=url, token=token, call_timeout_s=call_timeout_s, connect_timeout_s=call_timeout_s)
    )
    report: dict[str, Any] = {"url": url, "contract": None, "search": None}
    try:
        try:
            await gw.connect()
        except GatewayError as exc:
            report["contract"] = {"ok": False, "error": exc.kind, "detail": exc.detail}
            return 1, report
        report["contract"] = {"ok": True}
        try:
            result = await gw.search({"query": query})
        except GatewayError as exc:
            report["search"] = {
                "ok": False,
                "error": exc.kind,
                "detail": exc.detail,
                "tool_duration_ms": round(exc.duration_ms or 0.0, 1),
            }
            return 1, report
        report["search"] = {
            "ok": True,
            "tool_duration_ms": round(result.duration_ms, 1),
            "sources": [s.public_dict() for s in result.sources],
            "dropped_invalid_sources": result.dropped,
            "truncated_sources": result.truncated,
        }
        return 0, report
    finally:
        await gw.aclose()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code, report = asyncio.run(check(args.url, args.token, args.query, args.timeout))
    json.dump(report, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")
    if code:
        failed = report["search"] or report["contract"]
        print(f"mcp-check: FAILED ({failed['error']}): {failed['detail']}", file=sys.stderr)
    return code
