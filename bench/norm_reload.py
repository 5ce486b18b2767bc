"""How soon a running search server answers from a norm just imported (or no longer from one just removed).

A base index (the Constitution, or the fictional test law when the Constitution cannot be had) is served by
`python -m panama_law serve` in a subprocess. Each repetition imports a small fictional law with the real CLI,
`python -m panama_law import FILE --norm NAME --data-dir DIR --wait 0` (so the CLI returns as soon as the index is
written), then sends back-to-back `tools/call` requests over one MCP session until an answer cites the new law: the
time from the CLI returning to that answer is the pickup. `remove` is timed the same way, until no answer cites it.
The CLI's exit takes a while after its write (the interpreter's teardown), so the time from the index file's write
(its mtime) to that answer is reported too: the part the server is responsible for, its file watch and its load.
The server's own load time for each change comes from its log. Figures: median and p95 over the repetitions, the
latency of the queries sent while the server was reloading against the same queries at rest, and the host's load.
One JSON line on stdout, the same in bench/results/norm_reload.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/norm_reload.py` from the repository root
    sys.path.insert(0, str(ROOT))

from bench.servers import wait_healthy  # noqa: E402
from bench.stats import percentile  # noqa: E402
from panama_law.index import disk as index  # noqa: E402
from panama_law.index.build import import_file, import_norms  # noqa: E402
from panama_law.ingest.sources import ImportOptions  # noqa: E402
from panama_law.settings import SOURCE_SHA256  # noqa: E402
from tests import constitution  # noqa: E402
from tests.norm_fixtures import LEY_NAME, LEY_TXT  # noqa: E402
from tests.ports import free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "norm_reload.json"
NORM = "Ley sintética de cometas 3 de 2097"
LAW = """LEY SINTÉTICA DE COMETAS 3 DE 2097 (texto ficticio de prueba, sin valor legal)

Artículo 1. Las cometas de papel solo podrán volar los martes por la tarde sobre las playas.

Artículo 2. Toda cometa de papel se inscribe en el registro municipal de juguetes voladores.

Artículo 3. Ninguna cometa de papel podrá llevar cola de más de diez metros.

Artículo 4. Los niños que vuelen cometas de papel usarán guantes de tela.

Artículo 5. Las cometas de papel abandonadas en la playa serán recogidas por la alcaldía.
"""
QUESTION = "¿qué días pueden volar las cometas de papel sobre las playas?"
CITATION_PREFIX = f"{NORM}, artículo"
LOADED = re.compile(r"index reloaded: generation \S+, \d+ articles, loaded in ([0-9.]+) s")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PANAMA_LAW_")}


def _cli(*args: str) -> float:
    """Run `python -m panama_law ARGS`; its wall time. Raises on failure."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "panama_law", *args], cwd=ROOT, env=_env(), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"python -m panama_law {args[0]} failed: {done.stderr.strip()}")
    return time.perf_counter() - started


def _start_server(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "panama_law", "serve", "--port", str(port), "--data-dir", str(data_dir)],
            cwd=ROOT,
            env=_env(),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_healthy(proc, f"http://127.0.0.1:{port}/healthz", what="the search server")
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}: {log.read_text(errors='replace')}") from None
    return proc, f"http://127.0.0.1:{port}"


async def _cites(session: ClientSession, latencies: list[float]) -> bool:
    started = time.perf_counter()
    result = await session.call_tool("search_panama_law", {"query": QUESTION})
    latencies.append((time.perf_counter() - started) * 1000)
    if result.is_error or result.structured_content is None:
        raise RuntimeError("tool call failed during the benchmark")
    return any(r["citation"].startswith(CITATION_PREFIX) for r in result.structured_content["results"])


async def _until(session: ClientSession, cited: bool, data_dir: Path, latencies: list[float]) -> tuple[float, float]:
    """Query until the answer does (or does not) cite the law: seconds from now (the CLI has just returned) to that
    answer, and from the index file's write to it."""
    since = time.perf_counter()
    written = index.index_path(data_dir).stat().st_mtime
    while await _cites(session, latencies) != cited:
        if time.perf_counter() - since > 120:
            raise RuntimeError("the server never served the change")
    return time.perf_counter() - since, time.time() - written


async def _run(url: str, data_dir: Path, law: Path, repetitions: int) -> dict[str, Any]:
    imports: list[float] = []
    removes: list[float] = []
    import_written: list[float] = []
    remove_written: list[float] = []
    import_cli_s: list[float] = []
    during: list[float] = []
    at_rest: list[float] = []
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for _ in range(20):
            if await _cites(session, at_rest):
                raise RuntimeError("the base index already cites the benchmark law")
        for _ in range(repetitions):
            import_cli_s.append(
                await asyncio.to_thread(
                    _cli, "import", str(law), "--norm", NORM, "--data-dir", str(data_dir), "--wait", "0"
                )
            )
            after_cli, after_write = await _until(session, True, data_dir, during)
            imports.append(after_cli)
            import_written.append(after_write)
            await asyncio.to_thread(_cli, "remove", NORM, "--data-dir", str(data_dir), "--wait", "0")
            after_cli, after_write = await _until(session, False, data_dir, during)
            removes.append(after_cli)
            remove_written.append(after_write)
        for _ in range(20):
            await _cites(session, at_rest)

    def summary(values: list[float], scale: float = 1.0, digits: int = 3) -> dict[str, float]:
        return {
            "median": round(statistics.median(values) * scale, digits),
            "p95": round(percentile(values, 95) * scale, digits),
            "max": round(max(values) * scale, digits),
        }

    return {
        "import_to_first_answer_s": summary(imports),
        "remove_to_first_answer_s": summary(removes),
        "index_written_to_first_answer_s": {"import": summary(import_written), "remove": summary(remove_written)},
        "import_cli_wall_s": summary(import_cli_s, digits=2),
        "queries_while_reloading_ms": {**summary(during, digits=1), "count": len(during)},
        "queries_at_rest_ms": {**summary(at_rest, digits=1), "count": len(at_rest)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--source", type=Path, default=None, help="Constitution JSON (default: as the tests find it)")
    args = parser.parse_args()
    source = args.source or constitution.lookup().path
    load_at_start = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="panama-law-reload-bench-") as scratch:
        data_dir = Path(scratch) / "data"
        if source is not None:
            import_file(source, data_dir, SOURCE_SHA256 if args.source is None else None)
            base = "constitution"
        else:  # no Constitution to be had: the fictional test law as the base, a much smaller index
            import_norms(LEY_TXT, data_dir, ImportOptions(norm=LEY_NAME))
            base = "test_law"
        law = Path(scratch) / "cometas.txt"
        law.write_text(LAW, encoding="utf-8")
        log = Path(scratch) / "serve.log"
        proc, url = _start_server(data_dir, log)
        try:
            figures = asyncio.run(_run(url, data_dir, law, args.repetitions))
        finally:
            proc.terminate()
            proc.wait(timeout=15)
        loads = [float(m) for m in LOADED.findall(log.read_text(encoding="utf-8", errors="replace"))]

    result: dict[str, Any] = {
        "base_index": base,
        "repetitions": args.repetitions,
        **figures,
        "server_load_s": {
            "median": round(statistics.median(loads), 3) if loads else None,
            "p95": round(percentile(loads, 95), 3) if loads else None,
            "count": len(loads),
        },
        "cpu_count": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load_at_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(result)
    RESULTS.write_text(line + "\n", encoding="utf-8")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
