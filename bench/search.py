"""Latency benchmark: full MCP round trips over loopback HTTP against `python -m panama_law serve`.

Starts the server in a subprocess (building its index into a scratch directory from the shared data, which also
measures build time and peak memory of the build and of the server process), then sends >= 500 `tools/call`
requests with a real MCP client, cycling through the eval file's questions. Prints the figures and writes them
to bench/results/search.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/search.py` from the repository root
    sys.path.insert(0, str(ROOT))

from bench.stats import percentile  # noqa: E402
from tests import constitution  # noqa: E402
from tests.ports import free_port  # noqa: E402

DEFAULT_EVAL = ROOT / "../shared/eval/retrieval_visible.jsonl"
RESULTS = ROOT / "bench" / "results" / "search.json"


def _peak_rss_mb(pid: int) -> float | None:
    """VmHWM of a live process (Linux); None elsewhere."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def _run_queries(url: str, questions: list[str], n: int) -> list[float]:
    timings: list[float] = []
    async with (
        httpx2.AsyncClient(timeout=10) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for q in questions[:5]:  # warm-up, not counted
            await session.call_tool("search_panama_law", {"query": q})
        for i in range(n):
            started = time.perf_counter()
            result = await session.call_tool("search_panama_law", {"query": questions[i % len(questions)]})
            timings.append((time.perf_counter() - started) * 1000)
            if result.is_error:
                raise RuntimeError("tool call failed during benchmark")
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--eval-file", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--source", type=Path, default=None, help="default: beside the checkout, cached or downloaded")
    args = parser.parse_args()
    if args.source is None:
        found = constitution.lookup()
        if found.path is None:
            print(f"bench/search.py: {found.why_missing}; pass --source PATH", file=sys.stderr)
            return 2
        args.source = found.path
    questions = [json.loads(line)["question"] for line in args.eval_file.read_text("utf-8").splitlines() if line]

    with tempfile.TemporaryDirectory(prefix="panama-law-bench-") as data_dir:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "panama_law", "import", str(args.source), "--data-dir", data_dir],
            check=True,
            cwd=ROOT,
            capture_output=True,
        )
        build_s = time.perf_counter() - started
        # Only the import child has ended so far, so the children's peak RSS is the build's.
        build_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

        port = free_port()
        env = {**os.environ, "PANAMA_LAW_LOG_LEVEL": "warning"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "panama_law", "serve", "--port", str(port), "--data-dir", data_dir],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            ready_started = time.perf_counter()
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.perf_counter() - ready_started > 60:
                    raise RuntimeError("server did not become healthy")
                time.sleep(0.05)
            ready_s = time.perf_counter() - ready_started
            timings = asyncio.run(_run_queries(f"http://127.0.0.1:{port}/mcp", questions, args.queries))
            rss = _peak_rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=15)

    figures: dict[str, Any] = {
        "queries": len(timings),
        "p50_ms": round(statistics.median(timings), 2),
        "p90_ms": round(percentile(timings, 90), 2),
        "p99_ms": round(percentile(timings, 99), 2),
        "max_ms": round(max(timings), 2),
        "index_build_s": round(build_s, 2),
        "index_build_peak_rss_mb": round(build_rss_mb, 1),
        "server_ready_s": round(ready_s, 2),
        "server_peak_rss_mb": round(rss, 1) if rss is not None else None,
        "cpu_count": os.cpu_count(),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
