"""Latency benchmark: from a tool result in hand to the evidence message arriving at a room participant.

What the page waits for after a search returns is: build the `Completed` message, serialize it, publish it
reliably through livekit-server, and receive it in the browser. This measures exactly that path with the
product's own `EvidencePublisher`, through a real livekit-server on loopback, between two Python
participants in one process (so `time.perf_counter` is one clock for both ends). The send time travels in
the message's `call_id`; the receiver subtracts it from its arrival time.

Messages carry three synthetic sources of realistic size (excerpts near the 750-character cap), and are
sent at a fixed pace, one every `--interval-ms`, the way evidence trickles in during a conversation rather
than as a flood. Prints p50/p95/max and writes them to bench/results/evidence.json. Target: p95 <= 50 ms.

`held_p50_ms` / `held_p95_ms` are how long the sender's awaited `publish` took: what a caller waiting for each
message would lose. The research session does not wait (`EvidencePublisher.post`); this figure is why.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/evidence.py` from the repository root
    sys.path.insert(0, str(ROOT))

from livekit import api, rtc  # noqa: E402

from agent.contract import Source  # noqa: E402
from agent.devstack import livekit_server  # noqa: E402
from agent.settings import DEV_API_KEY, DEV_API_SECRET  # noqa: E402
from agent.voice.evidence import TOPIC, Completed, EvidencePublisher  # noqa: E402
from bench.stats import percentile  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "evidence.json"
TARGET_P95_MS = 50.0
ROOM = "lexvoz-bench-evidencia"
CALL_PREFIX = "bench-"


def _free_livekit_port(start: int = 17_930) -> int:
    """A port P with P and P+1 free, never congruent to 7880 mod 50 (livekit_server derives UDP ports from it)."""
    for port in range(start, start + 500):
        if port % 50 == 7880 % 50:
            continue
        try:
            for p in (port, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port for livekit-server")


def synthetic_sources() -> list[Source]:
    """Three visibly synthetic sources, sized like real search results (titles, citations, long excerpts)."""
    filler = (
        "Texto sintético de referencia para medir la latencia de la evidencia; no es una norma real ni debe "
        "citarse. Reproduce la longitud habitual de un extracto de la Constitución con varias oraciones. "
    )
    return [
        Source(
            title=f"Ley Sintética de Prueba — TÍTULO {n} - DISPOSICIONES DE EJEMPLO — Capítulo {n}°: Medición",
            citation=f"Ley Sintética de Prueba, artículo {100 + n}",
            excerpt=(filler * 4)[:720],
        )
        for n in (1, 2, 3)
    ]


def _token(identity: str) -> str:
    grants = api.VideoGrants(room_join=True, room=ROOM, can_publish=True, can_publish_data=True, can_subscribe=True)
    return (
        api.AccessToken(DEV_API_KEY, DEV_API_SECRET)
        .with_identity(identity)
        .with_ttl(timedelta(minutes=10))
        .with_grants(grants)
        .to_jwt()
    )


async def _measure(url: str, messages: int, warmup: int, interval_s: float) -> dict[str, Any]:
    sender, receiver = rtc.Room(), rtc.Room()
    latencies_ms: list[float] = []
    held_ms: list[float] = []
    payload_bytes: list[int] = []
    arrived: dict[int, float] = {}
    total = warmup + messages
    all_in = asyncio.Event()
    sender_seen = asyncio.Event()

    def on_data(packet: rtc.DataPacket) -> None:
        now = time.perf_counter()
        if packet.topic != TOPIC:
            return
        message = json.loads(packet.data)
        _, seq, sent_ns = message["call_id"].split("-")
        arrived[int(seq)] = now
        if int(seq) >= warmup:
            latencies_ms.append((now - int(sent_ns) / 1e9) * 1000)
            payload_bytes.append(len(packet.data))
        if len(arrived) == total:
            all_in.set()

    receiver.on("data_received", on_data)
    receiver.on("participant_connected", lambda _p: sender_seen.set())
    await receiver.connect(url, _token("receptor"))
    await sender.connect(url, _token("emisor"))
    if not receiver.remote_participants:
        await asyncio.wait_for(sender_seen.wait(), 10)
    publisher = EvidencePublisher(sender.local_participant)
    sources = synthetic_sources()
    try:
        next_at = time.perf_counter()
        for seq in range(total):
            sent_ns = time.perf_counter_ns()  # the tool result is in hand: everything after this is measured
            message = Completed.of(f"{CALL_PREFIX}{seq}-{sent_ns}", seq, 12.5, sources)
            if not await publisher.publish(message):
                raise RuntimeError("publish failed")
            if seq >= warmup:
                held_ms.append((time.perf_counter_ns() - sent_ns) / 1e6)
            next_at += interval_s
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        try:
            await asyncio.wait_for(all_in.wait(), 10)
        except TimeoutError:
            pass  # reported as lost below
    finally:
        await sender.disconnect()
        await receiver.disconnect()
    if not latencies_ms:
        raise RuntimeError("no message arrived")
    return {
        "messages": len(latencies_ms),
        "lost": total - len(arrived),
        "p50_ms": round(statistics.median(latencies_ms), 2),
        "p95_ms": round(percentile(latencies_ms, 95), 2),
        "p99_ms": round(percentile(latencies_ms, 99), 2),
        "max_ms": round(max(latencies_ms), 2),
        "mean_ms": round(statistics.fmean(latencies_ms), 2),
        "payload_bytes": max(payload_bytes),
        "held_p50_ms": round(statistics.median(held_ms), 2),
        "held_p95_ms": round(percentile(held_ms, 95), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=300, help="measured messages (default 300, at least 200)")
    parser.add_argument("--warmup", type=int, default=20, help="messages sent first and not measured")
    parser.add_argument("--interval-ms", type=float, default=25.0, help="pace between messages")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.messages < 200:
        parser.error("--messages must be at least 200")

    port = _free_livekit_port()
    with tempfile.TemporaryDirectory(prefix="lexvoz-bench-") as tmp:
        log = Path(tmp) / "livekit-server.log"
        server = livekit_server.start(api_key=DEV_API_KEY, api_secret=DEV_API_SECRET, port=port, log_path=log)
        try:
            result = asyncio.run(
                _measure(f"ws://127.0.0.1:{port}", args.messages, args.warmup, args.interval_ms / 1000)
            )
        finally:
            server.terminate()
            try:
                server.wait(10)
            except Exception:
                server.kill()
                server.wait(5)
    result.update(
        {
            "interval_ms": args.interval_ms,
            "target_p95_ms": TARGET_P95_MS,
            "meets_target": result["p95_ms"] <= TARGET_P95_MS,
            "livekit_server": livekit_server.VERSION,
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        }
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"evidence latency over {result['messages']} messages ({result['payload_bytes']} B each, "
        f"{result['lost']} lost): p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms, max {result['max_ms']} ms "
        f"(target p95 <= {TARGET_P95_MS:.0f} ms: {'met' if result['meets_target'] else 'MISSED'})"
    )
    try:
        shown = args.output.relative_to(ROOT)
    except ValueError:
        shown = args.output
    print(f"written to {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
