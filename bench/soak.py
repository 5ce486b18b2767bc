"""Whether anything is lost or left unsaid when things break for an hour while people talk.

`python bench/soak.py --minutes M [--conversations N] [--cluster]` starts the stack in rehearsal mode on free
loopback ports (livekit-server, the embedded search server behind toxiproxy, the Realtime stand-in, the page
service, two workers, and a throwaway PostgreSQL for the evidence ledger), keeps N people talking for M minutes
(each opens the page, asks typed and spoken questions, barges in now and then, leaves, and someone new comes), and
meanwhile injects, in a repeating cycle: the search server killed and started again; the search server slowed past
the tool's deadline by toxiproxy, then fast again; the model's sockets dropped by the stand-in while it answers;
livekit-server restarted; one worker killed and started again; and, on a track of its own, the ledger's database
stopped for a minute and started again. With `--cluster` the two workers register through two livekit-server nodes
sharing a Redis, as a scaled-out deployment runs.

It prints one JSON line and writes `bench/results/soak.json` (see bench/soak/figures.py for each figure):
`minutes`, `conversations`, `questions`, `evidence_lost`, `ledger_lost`, `faults`, `failures_told`,
`stuck_pages`, `worker_deaths`, `rss_growth_pct_per_hour` and `fd_growth` per program, `recovery_p95_s`, with
the load average at start and end. It exits 1 when a goal a run of this length can show is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/soak.py` from the repository root
    sys.path.insert(0, str(ROOT))

from bench.soak.faults import FaultOptions, Injector, schedule  # noqa: E402
from bench.soak.figures import GOALS, count_job_crashes, figures, missed_goals  # noqa: E402
from bench.soak.people import PeopleOptions, keep_people_coming  # noqa: E402
from bench.soak.programs import Programs  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "soak.json"
SAMPLE_EVERY_S = 5.0
WARMUP_S = 20.0
TAIL_S = 25.0


async def soak(programs: Programs, args: argparse.Namespace) -> dict[str, Any]:
    injector = Injector(programs, FaultOptions(ledger_down_s=args.ledger_down_s))
    started = time.monotonic()
    stop_at = started + args.minutes * 60
    page_plan, ledger_plan = schedule(args.minutes, WARMUP_S, TAIL_S)

    async def page_faults() -> None:
        for at, kind in page_plan:
            await asyncio.sleep(max(0.0, started + at - time.monotonic()))
            fault = await injector.inject(kind)
            print(f"soak: {kind} at {at:.0f} s, cleared: {fault.cleared_at is not None}", file=sys.stderr)

    async def ledger_faults() -> None:
        for at in ledger_plan:
            await asyncio.sleep(max(0.0, started + at - time.monotonic()))
            await injector.inject("ledger_db_stopped")

    async def watch() -> None:
        while time.monotonic() < stop_at + 5:
            programs.sample()
            programs.check_workers()
            await asyncio.sleep(SAMPLE_EVERY_S)

    people_opts = PeopleOptions(web_url=programs.stack.web_url, conversations=args.conversations, seed=args.seed)
    results = await asyncio.gather(keep_people_coming(people_opts, stop_at), page_faults(), ledger_faults(), watch())
    visits = results[0]
    # every conversation is over: give the ledger writers their flush, then read the ledger
    await asyncio.sleep(3)
    programs.check_workers()
    return figures(
        minutes=args.minutes,
        conversations=args.conversations,
        visits=visits,
        faults=injector.faults,
        ledger_url=programs.ledger_url,
        watched=programs.watched,
        unplanned_exits=programs.unplanned_exits,
        job_crashes=count_job_crashes(programs.log_dir),
        stuck_after_s=people_opts.stuck_after_s,
        t0=started,
    )


def keep_samples(programs: Programs, path: Path) -> None:
    """Every program's samples, one JSON line each, so a run's memory and descriptor figures can be worked out
    again (a new definition, a plot) without running the hour again."""
    with path.open("w", encoding="utf-8") as out:
        for name, watched in programs.watched.items():
            for s in watched.samples:
                row = {"program": name, "at": s.at, "pid": s.pid, "rss_mb": s.rss_mb, "fds": s.fds}
                out.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/soak.py", description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=60.0, help="how long people talk while faults are injected")
    p.add_argument("--conversations", type=int, default=4, help="people talking at once")
    p.add_argument("--speed", type=float, default=8.0, help="the stand-in's speech pacing (1.0 = real time)")
    p.add_argument("--ledger-down-s", type=float, default=60.0, help="how long the ledger's database stays stopped")
    p.add_argument("--seed", type=int, default=7, help="the people's choices (questions, barge-ins, visit lengths)")
    p.add_argument(
        "--cluster",
        action="store_true",
        help="two livekit-server nodes on Redis, each worker registered through its own (docs/deploy.md)",
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--keep-logs", type=Path, default=None, help="copy every program's log, and its samples, here at the end"
    )
    args = p.parse_args(argv)
    if not 3 <= args.minutes <= 24 * 60:
        p.error("--minutes must be between 3 and 1440 (every fault kind needs about 3 minutes)")
    if not 1 <= args.conversations <= 50:
        p.error("--conversations must be between 1 and 50")
    # Every person asks the page service from 127.0.0.1: lift its per-address limits for this run only.
    os.environ["LEXVOZ_TOKEN_REQUESTS_PER_MINUTE"] = "1000"
    os.environ["LEXVOZ_MAX_CONVERSATIONS"] = str(max(50, args.conversations * 4))
    os.environ["LEXVOZ_MAX_DISPATCHES_PER_MINUTE"] = "1000"
    os.environ["LEXVOZ_MAX_PENDING_SESSIONS_PER_CLIENT"] = str(max(10, args.conversations * 4))
    # An hour-long run is stopped with `kill` as often as with Ctrl-C: both must stop livekit-server, PostgreSQL and
    # toxiproxy (Python's default SIGTERM ends the process without running `finally`, and leaves them running).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="lexvoz-soak-") as tmp:
        programs = Programs(Path(tmp), conversations=args.conversations, speed=args.speed, cluster=args.cluster)
        try:
            programs.start()
            fig = asyncio.run(soak(programs, args))
        finally:
            programs.stop()
            if args.keep_logs is not None:
                shutil.copytree(programs.log_dir, args.keep_logs, dirs_exist_ok=True)
                keep_samples(programs, args.keep_logs / "samples.jsonl")
    fig = {
        **fig,
        "goals": GOALS,
        "cluster": args.cluster,
        "standin_speed": args.speed,
        "ledger_down_s": args.ledger_down_s,
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    fig["missed"] = missed_goals(fig, long_run=args.minutes >= 30)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(fig, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(fig, ensure_ascii=False))
    return 0 if not fig["missed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
