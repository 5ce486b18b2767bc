"""Latency benchmark: full MCP round trips over loopback HTTP against `python -m panama_law serve`, at scale.

Builds an index in a scratch directory: the Constitution, then generated filler norms until the corpus is
`--scale` times the Constitution's article count (default 10x), imported through `python -m panama_law import`
like any team's laws. The filler is made of the Constitution's own sentences reshuffled into new articles under
new names, so term statistics and passage lengths stay realistic; it is benchmark data, never legal text. Then it
starts the server in a subprocess, sends >= 500 `tools/call` requests with a real MCP client, cycling through the
eval file's questions, and writes build time, peak memory of the build and of the server, latency percentiles, the
CPU the client and the server spend per call, the in-process search time split into the query embedding and the
rest, and the machine's load average to bench/results/search.json (the machine may be shared: read latency with
the load). It also times fixed reference work before and after (`bench/hostspeed.py`): the same code has run
twice as slow on this machine on another day, and only the reference tells a slower host from slower code.

`--against CHECKOUT` compares two versions of the code where the host's swings cannot: a second server runs from
another checkout of this repository (say `git worktree add ../base main`) on the same index, beside this one, and
one client alternates blocks of `SIDE_BLOCK` calls between the two. Run one after the other on one afternoon, the
same code measured 12.9 to 16.9 ms p50 at 10x; side by side, a 0.4 ms difference showed the same sign twice.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/search.py` from the repository root
    sys.path.insert(0, str(ROOT))

from bench.hostspeed import reference  # noqa: E402
from bench.servers import wait_healthy  # noqa: E402
from bench.stats import percentile  # noqa: E402
from panama_law.index import disk as index  # noqa: E402
from panama_law.ingest import corpus  # noqa: E402
from tests import constitution  # noqa: E402
from tests.ports import free_port  # noqa: E402

DEFAULT_EVAL = ROOT / "../shared/eval/retrieval_visible.jsonl"
SIDE_BLOCK = 20
RESULTS = ROOT / "bench" / "results" / "search.json"


def filler_norms(constitution: bytes, scale: int, seed: int = 7) -> list[dict[str, Any]]:
    """.jsonl rows of (scale - 1) filler norms, each as long as the Constitution, from its reshuffled sentences."""
    from panama_law.index.passages import sentences

    articles = corpus.parse(constitution)
    pool = [a.text[s.start : s.end].strip() for a in articles for s in sentences(a.text)]
    lengths = [len(sentences(a.text)) for a in articles]
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for n in range(1, scale):
        name = f"Norma de relleno {n} de banco"
        for number, count in enumerate(lengths, 1):
            title = rng.randint(1, 12)
            rows.append(
                {
                    "norm": name,
                    "article": number,
                    "text": " ".join(rng.choice(pool) for _ in range(count)),
                    "headings": [f"Título {title}. Relleno {title}", f"Capítulo {number // 10 + 1}"],
                    "gaceta": f"{90000 + n}",
                    "date": "2000-01-01",
                }
            )
    return rows


def _timed_import(path: Path, data_dir: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "panama_law", "import", str(path), "--data-dir", data_dir],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    return time.perf_counter() - started


def _in_process(scaled: Path, alone: Path, questions: list[str], n: int) -> dict[str, Any]:
    """`Searcher.search` alone (no HTTP), on the scaled index and on the Constitution alone, queries interleaved
    so both see the same machine load: the difference is what the corpus size costs. The query embedding alone
    (`Searcher.query_vector`, which does not depend on the corpus) is timed in the same rounds, so a search splits
    into the embedding and the rest (BM25, the vector products, fusion, excerpts)."""
    from panama_law import embedding
    from panama_law.retrieve.search import Searcher

    searchers = {"scaled": Searcher(index.load(scaled)), "constitution_alone": Searcher(index.load(alone))}
    times: dict[str, list[float]] = {name: [] for name in [*searchers, "embedding"]}
    for q in questions[:5]:
        for searcher in searchers.values():
            searcher.search(q)
    for i in range(n):
        question = questions[i % len(questions)]
        for name, searcher in searchers.items():
            started = time.perf_counter()
            searcher.search(question)
            times[name].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        with embedding.one_blas_thread():
            searchers["scaled"].query_vector(question)
        times["embedding"].append((time.perf_counter() - started) * 1000)
    times["scaled_minus_embedding"] = [t - e for t, e in zip(times["scaled"], times["embedding"], strict=True)]
    return {
        name: {"p50_ms": round(statistics.median(t), 2), "p99_ms": round(percentile(t, 99), 2)}
        for name, t in times.items()
    }


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process (psutil, as `procstats` uses); None once it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return float(times.user + times.system)


def _peak_rss_mb(pid: int) -> float | None:
    """VmHWM of a live process (Linux); None elsewhere."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def _run_queries(url: str, questions: list[str], n: int, server_pid: int) -> tuple[list[float], dict[str, Any]]:
    """Round-trip times of `n` calls, plus the CPU per call of the client (this process) and of the server."""
    timings: list[float] = []
    async with (
        httpx2.AsyncClient(timeout=10) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for q in questions[:5]:  # warm-up, not counted
            await session.call_tool("search_panama_law", {"query": q})
        client_cpu, server_cpu = time.process_time(), _cpu_s(server_pid)
        for i in range(n):
            started = time.perf_counter()
            result = await session.call_tool("search_panama_law", {"query": questions[i % len(questions)]})
            timings.append((time.perf_counter() - started) * 1000)
            if result.is_error:
                raise RuntimeError("tool call failed during benchmark")
        client_cpu = time.process_time() - client_cpu
        server_end = _cpu_s(server_pid)
    cpu = {
        "client_ms": round(client_cpu / n * 1000, 2),
        "server_ms": round((server_end - server_cpu) / n * 1000, 2)
        if server_cpu is not None and server_end is not None
        else None,
    }
    return timings, cpu


def _start_server(checkout: Path, data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    """`python -m panama_law serve` from `checkout` on a free port, once healthy: the process and its MCP URL."""
    port = free_port()
    env = {**os.environ, "PANAMA_LAW_LOG_LEVEL": "warning"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "panama_law", "serve", "--port", str(port), "--data-dir", data_dir],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_healthy(proc, f"http://127.0.0.1:{port}/healthz", what=f"the server from {checkout}")
    return proc, f"http://127.0.0.1:{port}/mcp"


async def _side_by_side(urls: dict[str, str], questions: list[str], n: int) -> dict[str, dict[str, float]]:
    """Latency percentiles of each server, one client alternating blocks of `SIDE_BLOCK` calls (which goes first
    alternates too), so both see the same host."""
    timings: dict[str, list[float]] = {name: [] for name in urls}
    async with contextlib.AsyncExitStack() as stack:
        sessions = {}
        for name, url in urls.items():
            http = await stack.enter_async_context(httpx2.AsyncClient(timeout=10))
            read, write, *_ = await stack.enter_async_context(streamable_http_client(url, http_client=http))
            sessions[name] = await stack.enter_async_context(ClientSession(read, write))
            await sessions[name].initialize()
            for q in questions[:5]:
                await sessions[name].call_tool("search_panama_law", {"query": q})
        names = list(urls)
        for block in range(max(n // SIDE_BLOCK, 1)):
            for name in names if block % 2 == 0 else names[::-1]:
                for k in range(SIDE_BLOCK):
                    question = questions[(block * SIDE_BLOCK + k) % len(questions)]
                    started = time.perf_counter()
                    result = await sessions[name].call_tool("search_panama_law", {"query": question})
                    timings[name].append((time.perf_counter() - started) * 1000)
                    if result.is_error:
                        raise RuntimeError(f"tool call failed on the {name} server during benchmark")
    return {
        name: {
            "p50_ms": round(statistics.median(t), 2),
            "p90_ms": round(percentile(t, 90), 2),
            "p99_ms": round(percentile(t, 99), 2),
        }
        for name, t in timings.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--scale", type=int, default=10, help="corpus size as a multiple of the Constitution's")
    parser.add_argument("--eval-file", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--source", type=Path, default=None, help="default: beside the checkout, cached or downloaded")
    parser.add_argument(
        "--against", type=Path, default=None, help="another checkout: its server runs beside this one (docstring)"
    )
    args = parser.parse_args()
    if args.source is None:
        found = constitution.lookup()
        if found.path is None:
            print(f"bench/search.py: {found.why_missing}; pass --source PATH", file=sys.stderr)
            return 2
        args.source = found.path
    questions = [json.loads(line)["question"] for line in args.eval_file.read_text("utf-8").splitlines() if line]
    load_at_start = os.getloadavg()
    reference_at_start = reference()

    with tempfile.TemporaryDirectory(prefix="panama-law-bench-") as data_dir:
        constitution_s = _timed_import(args.source, data_dir)
        alone = Path(data_dir) / "constitution-alone"
        alone.mkdir()
        shutil.copy(index.index_path(Path(data_dir)), index.index_path(alone))
        filler = Path(data_dir) / "filler.jsonl"
        rows = filler_norms(args.source.read_bytes(), args.scale)
        filler.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
        filler_s = _timed_import(filler, data_dir) if rows else 0.0
        filler.unlink()
        # Only the import children have ended so far, so the children's peak RSS is the builds'.
        build_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        loaded = index.load(Path(data_dir))
        sizes = {"norms": len(loaded.norms), "articles": len(loaded.articles), "passages": len(loaded.passages)}
        index_mb = index.index_path(Path(data_dir)).stat().st_size / 1e6
        del loaded

        ready_started = time.perf_counter()
        proc, url = _start_server(ROOT, data_dir)
        try:
            ready_s = time.perf_counter() - ready_started
            timings, cpu_per_call = asyncio.run(_run_queries(url, questions, args.queries, proc.pid))
            rss = _peak_rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=15)
        side: dict[str, Any] | None = None
        if args.against is not None:
            servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
            try:
                servers["this"] = _start_server(ROOT, data_dir)
                servers["against"] = _start_server(args.against.resolve(), data_dir)
                urls = {name: url for name, (_, url) in servers.items()}
                side = {"checkout": str(args.against), **asyncio.run(_side_by_side(urls, questions, args.queries))}
            finally:
                for server, _ in servers.values():
                    server.terminate()
                    server.wait(timeout=15)
        in_process = _in_process(Path(data_dir), alone, questions, args.queries)

    figures: dict[str, Any] = {
        "corpus": {**sizes, "scale_vs_constitution": args.scale, "index_file_mb": round(index_mb, 1)},
        "queries": len(timings),
        "p50_ms": round(statistics.median(timings), 2),
        "p90_ms": round(percentile(timings, 90), 2),
        "p99_ms": round(percentile(timings, 99), 2),
        "max_ms": round(max(timings), 2),
        "in_process_search_ms": in_process,
        # Where a round trip goes: the search itself (in process, same questions) and everything else (the MCP
        # client, HTTP, the server's MCP handling, scheduling), with the CPU each side spends per call.
        "breakdown_p50_ms": {
            "search_in_process": in_process["scaled"]["p50_ms"],
            "query_embedding": in_process["embedding"]["p50_ms"],
            "search_minus_embedding": in_process["scaled_minus_embedding"]["p50_ms"],
            "outside_search": round(statistics.median(timings) - in_process["scaled"]["p50_ms"], 2),
        },
        "cpu_per_call_ms": cpu_per_call,
        "index_build_s": round(constitution_s + filler_s, 2),
        "index_build_constitution_s": round(constitution_s, 2),
        "index_build_filler_s": round(filler_s, 2),
        "index_build_peak_rss_mb": round(build_rss_mb, 1),
        "server_ready_s": round(ready_s, 2),
        "server_peak_rss_mb": round(rss, 1) if rss is not None else None,
        "cpu_count": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load_at_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "host_reference_at_start": reference_at_start,
        "host_reference_at_end": reference(),
    }
    if side is not None:
        figures["side_by_side"] = side
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
