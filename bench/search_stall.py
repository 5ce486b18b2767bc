"""Whether one client's queries can stall another's: a victim's latency at rest and under two attacking clients.

`python -m panama_law serve` runs in a subprocess on the Constitution's index (the fictional test law when the
Constitution cannot be had). A victim client asks an ordinary question about ten times a second over one MCP
session and times each call: first with nobody else there, then while two attacker clients, each on its own
session and event loop, send the worst query the server accepts at about `--rate` calls a second each, and then
while they send what a probe once used to stall the server, `"\\ufdfa" * 2000` (36,000 characters once
normalised), which must now be refused, fast. The worst accepted query is built here from the server's own bounds
(`schema.MAX_QUERY_TOKENS`): the candidates are the lexicon's words with the longest expansions (the encoder reads
the query and the query with its expansion) and random encoder pieces, and the slower of the two in process wins.

Figures: the victim's p50/p95 at rest and under each attack, `ratio` (p50 under the worst accepted query over p50 at
rest) against `goal_ratio`, the attackers' own latencies, and `refused_fast_ms` (how long the refusal of the old
probe took). One JSON line on stdout, the same in bench/results/search_stall.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/search_stall.py` from the repository root
    sys.path.insert(0, str(ROOT))

from bench.servers import wait_healthy  # noqa: E402
from bench.stats import percentile  # noqa: E402
from panama_law import embedding  # noqa: E402
from panama_law.index import disk as index  # noqa: E402
from panama_law.index.build import import_file, import_norms  # noqa: E402
from panama_law.ingest.sources import ImportOptions  # noqa: E402
from panama_law.retrieve.lexicon import CONSTITUTION  # noqa: E402
from panama_law.retrieve.search import Searcher  # noqa: E402
from panama_law.serve.schema import MAX_QUERY_TOKENS, QueryError, check_query_size  # noqa: E402
from panama_law.settings import SOURCE_SHA256  # noqa: E402
from tests import constitution  # noqa: E402
from tests.norm_fixtures import LEY_NAME, LEY_TXT  # noqa: E402
from tests.ports import free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "search_stall.json"
TOOL = "search_panama_law"
VICTIM_QUESTION = "¿puede el presidente de la república ser reelegido para el periodo siguiente?"
OLD_PROBE = "\ufdfa" * 2000
GOAL_RATIO = 2.0
VICTIM_INTERVAL_S = 0.1


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PANAMA_LAW_")}


def _fits(text: str) -> bool:
    try:
        check_query_size(text)
    except QueryError:
        return False
    return True


def _lexicon_candidate() -> str:
    """The lexicon's single words with the longest expansions per token, as many as the token bound takes."""
    keys = [k for k in CONSTITUTION.table if " " not in k]
    keys.sort(key=lambda k: -embedding.token_count(CONSTITUTION.table[k]) / embedding.token_count(k))
    chosen: list[str] = []
    for key in keys:
        if _fits(" ".join([*chosen, key])):
            chosen.append(key)
    return " ".join(chosen)


def _random_candidate(seed: int = 7) -> str:
    """Random encoder pieces, as many as the token bound takes (distinct pieces: no cache helps)."""
    rng = random.Random(seed)
    sp = embedding._get().sp
    ids: list[int] = []
    while True:
        more = [*ids, rng.randrange(3, sp.get_piece_size())]
        if not _fits(sp.decode(more)):
            return str(sp.decode(ids))
        ids = more


def _in_process_ms(searcher: Searcher, query: str, repeats: int = 10) -> float:
    searcher.search(query)
    started = time.perf_counter()
    for _ in range(repeats):
        searcher.search(query)
    return (time.perf_counter() - started) * 1000 / repeats


def worst_accepted(data_dir: Path) -> dict[str, Any]:
    """The slower (in process) of the two candidates, with its size and cost."""
    searcher = Searcher(index.load(data_dir))
    timed = [
        (_in_process_ms(searcher, q), name, q)
        for name, q in (("lexicon", _lexicon_candidate()), ("random", _random_candidate()))
    ]
    ms, name, query = max(timed)
    return {
        "query": query,
        "kind": name,
        "chars": len(query),
        "tokens": embedding.token_count(query),
        "in_process_ms": round(ms, 1),
        "ordinary_in_process_ms": round(_in_process_ms(searcher, VICTIM_QUESTION), 1),
    }


@contextlib.asynccontextmanager
async def _session(url: str) -> AsyncIterator[ClientSession]:
    """One MCP client session with its own HTTP client, initialised."""
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _timed_call(session: ClientSession, query: str) -> tuple[float, bool]:
    started = time.perf_counter()
    result = await session.call_tool(TOOL, {"query": query})
    return (time.perf_counter() - started) * 1000, bool(result.is_error)


async def _victim(url: str, calls: int) -> list[float]:
    latencies: list[float] = []
    async with _session(url) as session:
        await _timed_call(session, VICTIM_QUESTION)
        for _ in range(calls):
            ms, refused = await _timed_call(session, VICTIM_QUESTION)
            if refused:
                raise RuntimeError("the victim's ordinary question was refused")
            latencies.append(ms)
            await asyncio.sleep(max(0.0, VICTIM_INTERVAL_S - ms / 1000))
    return latencies


def _attacker(url: str, query: str, rate: float, stop: threading.Event, out: list[tuple[float, bool]]) -> None:
    """In its own thread and event loop: `query` at `rate` calls a second until `stop`."""

    async def run() -> None:
        async with _session(url) as session:
            while not stop.is_set():
                ms, refused = await _timed_call(session, query)
                out.append((ms, refused))
                await asyncio.sleep(max(0.0, 1 / rate - ms / 1000))

    asyncio.run(run())


def _under_attack(url: str, query: str, rate: float, calls: int) -> tuple[list[float], list[tuple[float, bool]]]:
    stop = threading.Event()
    attacks: list[tuple[float, bool]] = []
    threads = [threading.Thread(target=_attacker, args=(url, query, rate, stop, attacks)) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # both attackers under way before the victim is timed
    try:
        victim = asyncio.run(_victim(url, calls))
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    return victim, attacks


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 1), "p95": round(percentile(values, 95), 1), "count": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=100, help="victim calls per phase")
    parser.add_argument("--rate", type=float, default=2.5, help="calls a second per attacker")
    parser.add_argument("--source", type=Path, default=None, help="Constitution JSON (default: as the tests find it)")
    args = parser.parse_args()
    source = args.source or constitution.lookup().path
    load_at_start = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="panama-law-stall-bench-") as scratch:
        data_dir = Path(scratch) / "data"
        if source is not None:
            import_file(source, data_dir, SOURCE_SHA256 if args.source is None else None)
            base = "constitution"
        else:  # no Constitution to be had: the fictional test law, a much smaller index
            import_norms(LEY_TXT, data_dir, ImportOptions(norm=LEY_NAME))
            base = "test_law"
        worst = worst_accepted(data_dir)
        port = free_port()
        log = Path(scratch) / "serve.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                [sys.executable, "-m", "panama_law", "serve", "--port", str(port), "--data-dir", str(data_dir)],
                cwd=ROOT,
                env=_env(),
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(proc, f"{url}/healthz", what="the search server")
            idle = asyncio.run(_victim(url, args.calls))
            attacked, attacks = _under_attack(url, worst["query"], args.rate, args.calls)
            probed, probes = _under_attack(url, OLD_PROBE, args.rate, args.calls)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {log.read_text(errors='replace')}") from None
        finally:
            proc.terminate()
            proc.wait(timeout=15)

    if any(refused for _, refused in attacks):
        raise RuntimeError("the worst accepted query was refused: the bench's candidate breaks the bounds")
    if not all(refused for _, refused in probes):
        raise RuntimeError("the old probe was searched, not refused")
    idle_p50 = statistics.median(idle)
    attack_p50 = statistics.median(attacked)
    result: dict[str, Any] = {
        "base_index": base,
        "idle_p50_ms": round(idle_p50, 1),
        "idle_p95_ms": round(percentile(idle, 95), 1),
        "attack_p50_ms": round(attack_p50, 1),
        "attack_p95_ms": round(percentile(attacked, 95), 1),
        "ratio": round(attack_p50 / idle_p50, 2),
        "goal_ratio": GOAL_RATIO,
        "met": attack_p50 / idle_p50 <= GOAL_RATIO,
        "worst_accepted": {k: v for k, v in worst.items() if k != "query"},
        "attacker_calls_ms": _summary([ms for ms, _ in attacks]),
        "attack_rate_per_client": args.rate,
        "old_probe_p50_ms": round(statistics.median(probed), 1),
        "old_probe_p95_ms": round(percentile(probed, 95), 1),
        "refused_fast_ms": round(statistics.median(ms for ms, _ in probes), 1),
        "refused_p95_ms": round(percentile([ms for ms, _ in probes], 95), 1),
        "max_query_tokens": MAX_QUERY_TOKENS,
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
