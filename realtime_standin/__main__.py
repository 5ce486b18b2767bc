"""Run the stand-in as a program: ``python -m realtime_standin --port 8765``.

Used by end-to-end tests and by the product's rehearsal mode, which start it as a subprocess.
Flags win over environment variables; the environment form exists so a process manager can
configure it without building a command line:

- ``REALTIME_STANDIN_TRANSCRIPTS``: a JSON list of transcripts (or one plain transcript)
- ``REALTIME_STANDIN_FALLBACK_TRANSCRIPT``: text for every turn once the list is used up
- ``REALTIME_STANDIN_SPEED``: pacing factor (1.0 = real time)

An empty (or blank) variable counts as unset, as for every Lexvoz setting.

Once listening it prints one line, ``realtime-standin ready <base_url>``, so a parent process
that passed ``--port 0`` can read the chosen port.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence

from .policy import DEFAULT_FALLBACK_TRANSCRIPT, DEFAULT_TOOL_NAME
from .server import RealtimeStandIn, is_loopback


def _env(name: str) -> str:
    """The variable's value, "" when unset: an empty (or blank) variable means "not set", as in every setting."""
    return os.environ.get(name, "").strip()


def _env_transcripts() -> list[str]:
    raw = _env("REALTIME_STANDIN_TRANSCRIPTS")
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return [raw]
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m realtime_standin", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (0 picks a free one)")
    parser.add_argument(
        "--transcript",
        action="append",
        dest="transcripts",
        default=None,
        metavar="TEXT",
        help="transcript for the next audio turn; repeat for several turns, used in order",
    )
    parser.add_argument(
        "--fallback-transcript",
        default=_env("REALTIME_STANDIN_FALLBACK_TRANSCRIPT") or DEFAULT_FALLBACK_TRANSCRIPT,
        help="transcript once the list is used up",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=_env("REALTIME_STANDIN_SPEED") or "1.0",  # a string: argparse converts it, or names the bad value
        help="output pacing factor (1.0 = real time, larger = faster)",
    )
    parser.add_argument("--function-call-delay", type=float, default=0.0, help="seconds before each function call")
    parser.add_argument("--tool-name", default=DEFAULT_TOOL_NAME, help="function the policy calls")
    parser.add_argument("--log-level", default="INFO", help="logging level (event types only are logged)")
    args = parser.parse_args(argv)
    if not is_loopback(args.host):
        parser.error("--host must be a loopback address")
    if args.speed <= 0:
        parser.error("--speed must be positive")
    if args.transcripts is None:
        args.transcripts = _env_transcripts()
    return args


async def _serve(args: argparse.Namespace) -> None:
    standin = RealtimeStandIn(
        host=args.host,
        port=args.port,
        transcripts=args.transcripts,
        fallback_transcript=args.fallback_transcript,
        tool_name=args.tool_name,
        speed=args.speed,
        function_call_delay=args.function_call_delay,
    )
    await standin.start()
    print(f"realtime-standin ready {standin.base_url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await standin.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
