"""`python -m agent mcp-check URL`: does this MCP server satisfy our search_panama_law contract?

For teams pointing Lexvoz at their own search service: the same gateway the worker uses connects,
checks the tool, runs one search, and prints what the model and the page would receive, each dropped
source with the reason, and, when something fails, what the server itself said. The URL is checked
against the transport policy before any request; the token is never printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from agent.contract import EndpointRefused
from agent.mcp.connection import endpoint_label
from agent.mcp.gateway import DEFAULT_MAX_REPLY_BYTES, GatewayError, GatewayOptions, McpGateway, insecure_hosts_of

DEFAULT_QUERY = "¿Cuál es el idioma oficial de la República de Panamá?"
EXIT_REFUSED = 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m agent mcp-check", description=__doc__.splitlines()[0])
    p.add_argument("url", help="the server's streamable HTTP endpoint, e.g. https://search.example/mcp")
    p.add_argument("--token", default=None, help="bearer token, if the server wants one (never printed)")
    p.add_argument("--query", default=DEFAULT_QUERY, help="the test search")
    p.add_argument("--timeout", type=float, default=8.0, help="per-call timeout in seconds")
    p.add_argument(
        "--insecure-host",
        action="append",
        default=None,
        metavar="HOST",
        help="allow plain http:// to HOST (default: LEXVOZ_MCP_INSECURE_HOSTS); loopback is always allowed",
    )
    p.add_argument("--max-reply-bytes", type=int, default=DEFAULT_MAX_REPLY_BYTES, help="reply body cap")
    return p


def _failure(exc: GatewayError) -> dict[str, Any]:
    out: dict[str, Any] = {"ok": False, "error": exc.reason, "detail": exc.detail}
    if exc.status is not None:
        out["http_status"] = exc.status
    if exc.server_text:
        out["server_said"] = exc.server_text
    return out


async def check(
    url: str,
    token: str | None,
    query: str,
    call_timeout_s: float,
    *,
    insecure_hosts: tuple[str, ...] = (),
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
) -> tuple[int, dict[str, Any]]:
    """Run the check; raises EndpointRefused before any request when the URL breaks the policy."""
    opts = GatewayOptions(
        url=url,
        token=token,
        call_timeout_s=call_timeout_s,
        connect_timeout_s=call_timeout_s,
        insecure_hosts=insecure_hosts,
        max_reply_bytes=max_reply_bytes,
    )
    gw = McpGateway(opts)
    report: dict[str, Any] = {"url": url, "contract": None, "search": None}
    try:
        try:
            await gw.connect()
        except GatewayError as exc:
            report["contract"] = _failure(exc)
            return 1, report
        conn = gw.connection
        report["contract"] = {"ok": True}
        if conn is not None:
            report["protocol_version"] = conn.protocol_version
        try:
            result = await gw.search({"query": query})
        except GatewayError as exc:
            report["search"] = {**_failure(exc), "tool_duration_ms": round(exc.duration_ms or 0.0, 1)}
            return 1, report
        report["search"] = {
            "ok": True,
            "tool_duration_ms": round(result.duration_ms, 1),
            "query_sent": result.query_sent,
            "sources": [s.public_dict() for s in result.sources],
            "dropped_invalid_sources": result.dropped,
            "dropped": result.drop_reasons,
            "not_examined_sources": result.truncated,
        }
        return 0, report
    finally:
        await gw.aclose("mcp-check done")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    hosts = args.insecure_host if args.insecure_host is not None else os.environ.get("LEXVOZ_MCP_INSECURE_HOSTS")
    try:
        code, report = asyncio.run(
            check(
                args.url,
                args.token,
                args.query,
                args.timeout,
                insecure_hosts=insecure_hosts_of(hosts),
                max_reply_bytes=args.max_reply_bytes,
            )
        )
    except EndpointRefused as exc:
        print(f"mcp-check: refused before any request: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    json.dump(report, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")
    if code:
        failed = report["search"] or report["contract"]
        print(
            f"mcp-check: FAILED ({failed['error']}) at {endpoint_label(args.url)}: {failed['detail']}", file=sys.stderr
        )
    else:
        for reason in report["search"]["dropped"]:
            print(f"mcp-check: dropped {reason}", file=sys.stderr)
    return code
