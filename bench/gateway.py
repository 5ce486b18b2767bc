"""Gateway overhead: `McpGateway.search` vs a bare `ClientSession.call_tool` to the same local server.

Both clients talk to one MCP server in a subprocess over loopback HTTP; calls alternate between the
two so machine noise hits both alike. The gateway's extra work is argument validation, the breaker,
the retry wrapper, the HTTP probe and result validation. Prints the figures and writes them to
bench/results/gateway.json. Target: overhead p50 under 1 ms.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.mcp.gateway import GatewayOptions, McpGateway  # noqa: E402
from bench.stats import percentile  # noqa: E402
from tests.ports import free_port  # noqa: E402

CALLS = int(os.environ.get("BENCH_CALLS", "600"))
WARMUP = 30


def pct(values: list[float], q: float) -> float:
    return percentile(values, q * 100)


async def run(url: str) -> dict[str, float | int | str]:
    gateway = McpGateway(GatewayOptions(url=url, call_timeout_s=10))
    await gateway.connect()
    bare_ms: list[float] = []
    gw_ms: list[float] = []
    async with (
        httpx2.AsyncClient() as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()
        for i in range(WARMUP + CALLS):
            query = {"query": f"consulta sintética {i}"}
            t0 = time.perf_counter()
            await session.call_tool("search_panama_law", query)
            t1 = time.perf_counter()
            await gateway.search(query)
            t2 = time.perf_counter()
            if i >= WARMUP:
                bare_ms.append((t1 - t0) * 1000)
                gw_ms.append((t2 - t1) * 1000)
    await gateway.aclose()
    per_call = [g - b for g, b in zip(gw_ms, bare_ms, strict=True)]
    return {
        "calls": CALLS,
        "bare_p50_ms": round(pct(bare_ms, 0.5), 3),
        "bare_p99_ms": round(pct(bare_ms, 0.99), 3),
        "gateway_p50_ms": round(pct(gw_ms, 0.5), 3),
        "gateway_p99_ms": round(pct(gw_ms, 0.99), 3),
        "overhead_p50_ms": round(pct(gw_ms, 0.5) - pct(bare_ms, 0.5), 3),
        "overhead_p99_ms": round(pct(gw_ms, 0.99) - pct(bare_ms, 0.99), 3),
        "overhead_median_of_pairs_ms": round(statistics.median(per_call), 3),
        "ratio_p50": round(pct(gw_ms, 0.5) / pct(bare_ms, 0.5), 3),
        "target_overhead_p50_ms": 1.0,
        "cpu_count": os.cpu_count() or 0,
        "python": platform.python_version(),
    }


def main() -> int:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp_fixture", str(port)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("benchmark server did not start")
        figures = asyncio.run(run(f"http://127.0.0.1:{port}/mcp"))
    finally:
        server.terminate()
        server.wait(10)
    out = ROOT / "bench" / "results" / "gateway.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    for key, value in figures.items():
        print(f"{key:>30}: {value}")
    print(f"written to {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
