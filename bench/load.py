"""How many conversations one worker host serves: N simulated people through the real stack, at once.

`python bench/load.py --sessions 25` starts the whole stack in rehearsal mode on free loopback ports
(livekit-server, the embedded search server with a cached index, the Realtime stand-in, the page service,
the worker), then N people each: get a room from `POST /api/session`, join it and publish a microphone,
wait until the agent listens, type one question, then speak one (a tone burst the stand-in hears as a
question). It prints one JSON line and writes `bench/results/load.json`:

- `completed`: people who got an agent and a `completed` message for both questions;
- `evidence_lost`: `started` messages that never got `completed`, `failed` or `discarded`;
- `answers_without_evidence`: the answers that ended `failed` (with the reason) or `discarded`, counted by kind;
- `listen_p50_s` / `listen_p95_s`: from asking for a session to the agent hearing the person (in the room,
  subscribed to the microphone, voice model connected: speech is heard from here on, over the greeting too);
- `greeted_p50_s` / `greeted_p95_s`: until the greeting has been played to the end and the agent listens;
- `join_steps`: where the time to being heard went, p50 and p95 of the seconds to each step of a join (the page
  service's answer, the person in the room, the agent in the room, the microphone subscribed, the agent's session
  started, its voice model connected); one round's own (with `--rounds`, in `per_round`);
- `tool_p50_ms` / `tool_p95_ms`: the tool's own duration from the `completed` messages;
- `rss_mb_per_session` / `pss_mb_per_session`: the worker's process tree at its peak, divided by N;
- `cpu_s_per_session_minute`: the worker tree's CPU seconds per conversation-minute: per minute that a person
  had an agent hearing them (`conversation_minutes`, from being heard to leaving or to the end of the talk window,
  whichever is first), so a run where people queue is comparable with one where all talk at once;
- the same memory and CPU figures for livekit-server, the stand-in, the search server and this process
  (the load generator), the load average at start and end (the machine may be shared), and `host_reference`:
  fixed work timed before the stack starts (`bench/hostspeed.py`), since this machine has run the same code
  twice as fast on one day as on another.

**The bare baseline.** Unless `--no-baseline`, the same people are run against a bare livekit-agents agent
(`bench/bare_agent.py`: the same Realtime plugin, model options and stand-in, the framework's defaults otherwise,
no tool) in the same run, rounds alternating with Lexvoz's (`--rounds R`: lexvoz, bare, lexvoz, bare, ... R
rounds of each, each round a fresh worker against the same livekit-server, stand-in and search server). The
bare agent cannot answer with evidence, so its people ask the same typed and spoken question and wait for
the spoken answer (`answered`: people whose two questions were both answered aloud); `completed` and
`evidence_lost` are the Lexvoz rounds' own. With several rounds the figures are medians over rounds (people
counts: the worst round; lost evidence and errors: summed), each round's own in `per_round`. Beside the Lexvoz keys
the JSON then has `baseline` (the same figures for the bare agent) and `cpu_ratio_vs_bare` / `rss_ratio_vs_bare`:
the worker's CPU seconds per conversation-minute and RSS per conversation, Lexvoz over bare (goal: both ≤ 1.10).
The bare agent's conversations are shorter than Lexvoz's (it answers with one sentence where Lexvoz reads its
sources back), so its fixed cost per conversation is spread over fewer minutes. `--tool-baseline` adds rounds of
the bare agent with a tool that answers at once with sources (`BARE_AGENT_TOOL`): the same shape of conversation
as Lexvoz's, without Lexvoz's code; `baseline_tool`, `cpu_ratio_vs_bare_tool` and `rss_ratio_vs_bare_tool` hold it.

With `--queue`, people behave as they do with a full host: each leaves when done, and whoever found no
free agent waits for one the way the page does (asking `POST /api/agent` again), for up to `--wait-s`;
`listen_*` then includes that wait, and `waited` counts the people who had to.

Every wait is bounded (`--timeout-s` per step); everything listens on 127.0.0.1; the stack stops at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/load.py` from the repository root
    sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from agent.devstack.processes import terminate, wait_for_text  # noqa: E402
from agent.devstack.stack import Stack, StackOptions  # noqa: E402
from bench.hostspeed import reference_in_subprocess  # noqa: E402
from bench.procstats import Sampler, TreeStats  # noqa: E402
from bench.stats import percentile  # noqa: E402
from tests import constitution  # noqa: E402
from tests.person import Person  # noqa: E402
from tests.ports import free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "load.json"
SPOKEN_QUESTION = "¿Cuál es el idioma oficial de Panamá?"
TYPED_QUESTIONS = (
    "¿A qué edad se adquiere la ciudadanía panameña?",
    "¿Qué dice la Constitución sobre la libertad de culto?",
    "¿Quién elige al Presidente de la República?",
    "¿Cuánto dura el periodo presidencial?",
    "¿Qué derechos tienen los trabajadores?",
)
TARGETS = {
    "listen_p95_s": 5.0,
    "tool_p95_ms": 100.0,
    "rss_mb_per_session": 80.0,
    "cpu_ratio_vs_bare": 1.10,
    "rss_ratio_vs_bare": 1.10,
}
BARE_AGENT = ROOT / "bench" / "bare_agent.py"
# "bare_tool": the bare agent with a tool that answers at once (bench/bare_agent.py, BARE_AGENT_TOOL).
Variant = Literal["lexvoz", "bare", "bare_tool"]


def round_order(rounds: int, *, baseline: bool, tool_baseline: bool = False) -> list[Variant]:
    """The workers of a run, in order: Lexvoz and bare alternating (and the bare agent with its tool, with
    `tool_baseline`), `rounds` of each (Lexvoz alone without a baseline). Alternating spreads a drift of the shared
    host (another job starting, a thermal step) over every agent instead of loading it onto whichever ran last."""
    one: list[Variant] = ["lexvoz"]
    if baseline:
        one.append("bare")
        if tool_baseline:
            one.append("bare_tool")
    return one * rounds


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """`numerator / denominator` to 3 decimals; None when either is missing or the denominator is not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return round(numerator / denominator, 3)


# Figures that are medians over rounds; people counts take the worst round and losses add up.
MEDIAN_KEYS = (
    "listen_p50_s",
    "listen_p95_s",
    "greeted_p50_s",
    "greeted_p95_s",
    "tool_p50_ms",
    "tool_p95_ms",
    "rss_mb_per_session",
    "pss_mb_per_session",
    "cpu_s_per_session_minute",
    "conversation_minutes",
    "talk_window_s",
)
WORST_KEYS = ("got_agent", "completed", "answered")
SUM_KEYS = ("evidence_lost", "waited", "error_count")


def combine_rounds(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One variant's figures over its rounds: medians of the measures, the worst round's people counts, losses
    and errors summed. One round gives back that round's figures unchanged (but for `rounds`)."""
    if not runs:
        return {}
    combined: dict[str, Any] = dict(runs[0])
    for key in (k for k in MEDIAN_KEYS if k in combined):
        values = [r[key] for r in runs if r.get(key) is not None]
        combined[key] = round(statistics.median(values), 2) if values else None
    for key in (k for k in WORST_KEYS if k in combined):
        values = [r[key] for r in runs if r.get(key) is not None]
        combined[key] = min(values) if values else None
    for key in (k for k in SUM_KEYS if k in combined):
        counted = [r[key] for r in runs if r.get(key) is not None]
        combined[key] = sum(counted) if counted else None
    if len(runs) > 1:
        kinds: Counter[str] = Counter()
        for r in runs:
            kinds.update(r.get("answers_without_evidence") or {})
        combined["answers_without_evidence"] = dict(kinds)
        combined["errors"] = [e for r in runs for e in r.get("errors", [])][:10]
        combined["programs"] = {}  # each round's own are in `per_round`
        combined.pop("join_steps", None)  # likewise: a join's steps are not combined across rounds
        combined.pop("round", None)
    combined["rounds"] = len(runs)
    return combined


def compare_with_bare(lexvoz: dict[str, Any], bare: dict[str, Any], name: str = "bare") -> dict[str, float | None]:
    """Lexvoz over a bare agent (`name`: "bare", or "bare_tool" for the one with a tool), for the worker's CPU per
    conversation-minute and RSS per conversation."""
    return {
        f"cpu_ratio_vs_{name}": ratio(lexvoz.get("cpu_s_per_session_minute"), bare.get("cpu_s_per_session_minute")),
        f"rss_ratio_vs_{name}": ratio(lexvoz.get("rss_mb_per_session"), bare.get("rss_mb_per_session")),
    }


def _index_cache(data_dir: Path) -> tuple[Path, bool]:
    """The e2e tests' cached search index (pytest cache, keyed by source and search code); seeds `data_dir`."""
    from panama_law.index import disk as law_index
    from tests.e2e.conftest import _index_cache_key

    name = law_index.index_path(data_dir).name
    cached = ROOT / ".pytest_cache" / "d" / "lexvoz-e2e-index" / _index_cache_key() / name
    if cached.is_file():
        shutil.copy2(cached, law_index.index_path(data_dir))
        return cached, True
    return cached, False


def _save_index(data_dir: Path, cached: Path) -> None:
    from panama_law.index import disk as law_index

    built = law_index.index_path(data_dir)
    if built.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, cached.with_suffix(".partial"))
        os.replace(cached.with_suffix(".partial"), cached)


def _livekit_port() -> int:
    from tests.e2e.conftest import livekit_port

    return livekit_port(start=18_400)


class Gate:
    """Everyone arrives (both questions asked, or given up); then the benchmark releases everyone at once."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.arrived = 0
        self.all_arrived = asyncio.Event()
        self.released = asyncio.Event()

    def arrive(self) -> None:
        self.arrived += 1
        if self.arrived >= self.expected:
            self.all_arrived.set()


class Outcome:
    """What happened to one person, with the times the figures are made of."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.listen_s: float | None = None
        self.greeted_s: float | None = None
        self.tool_ms: list[float] = []
        self.completed = 0
        self.answered = 0  # questions answered aloud (the bare agent's runs, which have no evidence)
        self.not_completed: list[str] = []  # "failed: <reason>" or "discarded", one per answer without evidence
        self.lost: list[str] = []
        self.error: str | None = None
        self.waited = False
        self.heard_at: float | None = None  # monotonic: the agent hears this person from here on
        self.left_at: float | None = None  # monotonic: done (in a queue, the person leaves now)
        self.join_steps: dict[str, float] = {}  # seconds from asking for a session to each step of the join


JOIN_STEPS = ("session", "in_room", "agent_joined", "mic_subscribed", "agent_started", "model_connected")


def join_steps(outcomes: list[Outcome]) -> dict[str, dict[str, float]]:
    """Where a join's time goes: for each step, p50 and p95 of the seconds from asking for a session to that step.

    `session` (the page service answered), `in_room` (the person's connection is up), `agent_joined`,
    `mic_subscribed` (the agent takes the person's audio), `agent_started` (its session is past initializing),
    `model_connected` (Lexvoz's voice model is connected; the bare agent has no such sign). Only people who
    were heard count, and only steps reached by the moment they were."""
    figures: dict[str, dict[str, float]] = {}
    for step in JOIN_STEPS:
        times = [o.join_steps[step] for o in outcomes if step in o.join_steps]
        if times:
            figures[step] = {"p50_s": round(percentile(times, 50), 2), "p95_s": round(percentile(times, 95), 2)}
    return figures


def conversation_minutes(outcomes: list[Outcome], window_end: float) -> float:
    """Minutes during which an agent was hearing someone, up to `window_end` (when the worker's CPU is read).

    Dividing CPU by people x the whole run instead counted, in a queue, every minute a person waited for a free
    agent as a minute of conversation, and made per-conversation CPU look several times cheaper than it is."""
    total = 0.0
    for o in outcomes:
        if o.heard_at is None:
            continue
        end = window_end if o.left_at is None else min(o.left_at, window_end)
        total += max(end - o.heard_at, 0.0)
    return total / 60


async def one_person(
    index: int,
    web_url: str,
    http: aiohttp.ClientSession,
    timeout_s: float,
    gate: Gate,
    queue_wait_s: float | None,
    variant: Variant = "lexvoz",
) -> Outcome:
    """One person's visit. `queue_wait_s`: wait up to this long for a free agent, as the page does, and leave
    when done; None: expect an agent at once and stay until everyone is done (peak memory with all in).
    Against the bare agent (`variant="bare"`) the same questions are asked and only the spoken answers awaited."""
    out = Outcome(index)
    person: Person | None = None
    t0 = time.monotonic()
    try:
        person = await Person.from_page_service(web_url, http, lexvoz=variant == "lexvoz")
        out.join_steps["session"] = time.monotonic() - t0
        await asyncio.wait_for(person.connect(), timeout_s)
        if queue_wait_s is not None:
            out.waited = await person.wait_for_agent(web_url, http, queue_wait_s) > 0
        await person.wait_until_heard(timeout_s)
        out.heard_at = time.monotonic()
        out.listen_s = out.heard_at - t0
        out.join_steps.update({step: at - t0 for step, at in person.first_at.items() if at <= out.heard_at})
        await person.wait_until_listening(timeout_s)
        out.greeted_s = time.monotonic() - t0
        seen: set[str] = set()
        for typed in (TYPED_QUESTIONS[index % len(TYPED_QUESTIONS)], None):
            if variant != "lexvoz":  # a bare agent publishes no research: its spoken answer is the answer
                await person.ask_aloud(typed=typed, within=timeout_s)
                out.answered += 1
                continue
            started, outcome = await person.ask(typed=typed, within=timeout_s, exclude=seen)
            seen.add(started.call_id)
            if outcome.type == "completed":
                out.completed += 1
                out.tool_ms.append(float(outcome.body["tool_duration_ms"]))
            else:  # an answer without evidence is no error of the run, but it must be visible in the figures
                reason = outcome.body.get("reason")
                out.not_completed.append(f"{outcome.type}: {reason}" if reason else outcome.type)
            await person.wait_until_listening(timeout_s)  # the spoken answer is over: no barge-in
    except Exception as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    try:
        if queue_wait_s is not None:
            out.left_at = time.monotonic()
        gate.arrive()
        # Stay in the room until everyone is done, so the peak memory has every conversation in it; in a
        # queue, leave at once, as people do, so the next one gets the agent.
        if queue_wait_s is None:
            await asyncio.wait_for(gate.released.wait(), timeout_s * 4)
    except TimeoutError:
        out.error = out.error or "never released"
    finally:
        if person is not None:
            out.lost = person.lost_evidence()
            try:
                await asyncio.wait_for(person.aclose(), 10)
            except Exception as exc:  # a slow disconnect does not change what was measured
                out.error = out.error or f"close: {type(exc).__name__}"
    return out


def worker_command(variant: Variant) -> list[str]:
    """How a round's worker is started: the Lexvoz worker, or the bare agent through livekit-agents' own CLI."""
    if variant == "lexvoz":
        return [sys.executable, "-m", "agent", "start"]
    return [sys.executable, "-m", "livekit.agents", "start", str(BARE_AGENT)]


def worker_variant_env(variant: Variant) -> dict[str, str]:
    """What a round's worker is told beside the run's settings: the bare agent's tool, for its tool rounds."""
    return {"BARE_AGENT_TOOL": "1"} if variant == "bare_tool" else {}


def start_workers(
    stack: Stack, count: int, variant: Variant = "lexvoz", tag: str = ""
) -> list[subprocess.Popen[bytes]]:
    """A round's workers (one per core is the advice), all registered with the stack's livekit-server."""
    procs: list[subprocess.Popen[bytes]] = []
    env = {**stack.common_env(), **stack.opts.worker_env, **worker_variant_env(variant)}
    args = worker_command(variant)
    try:
        for n in range(1, count + 1):
            log = stack.opts.log_dir / f"{variant}-worker-{n}{tag}.log"
            with open(log, "ab") as out:
                proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(proc)
            wait_for_text(log, "registered worker", proc, timeout=90)
    except BaseException:
        for proc in procs:
            terminate(proc)
        raise
    return procs


async def drive(
    stack: Stack,
    workers: list[subprocess.Popen[bytes]],
    sessions: int,
    timeout_s: float,
    ramp_s: float,
    queue_wait_s: float | None = None,
    variant: Variant = "lexvoz",
) -> dict[str, Any]:
    names = {c.name: c.proc.pid for c in stack.children}
    trees = [TreeStats(name, pid) for name, pid in names.items()]
    trees += [TreeStats("worker" if n == 1 else f"worker-{n}", proc.pid) for n, proc in enumerate(workers, start=1)]
    trees.append(TreeStats("load-generator", os.getpid(), with_children=False))
    sampler = Sampler(trees)
    sampler.start()
    started = time.monotonic()
    gate = Gate(sessions)
    async with aiohttp.ClientSession() as http:
        tasks = []
        for i in range(sessions):
            person = one_person(i, stack.web_url, http, timeout_s, gate, queue_wait_s, variant)
            tasks.append(asyncio.create_task(person))
            if ramp_s > 0:
                await asyncio.sleep(ramp_s / sessions)  # the arrival pattern, not a wait for something
        # Everyone has either asked both questions or given up (each step is bounded, so this is too).
        await gate.all_arrived.wait()
        window_end = time.monotonic()
        talk_window_s = window_end - started
        for tree in trees:  # CPU up to here: every conversation still open
            tree.sample(memory=False)
        cpu = {tree.name: tree.cpu_s() for tree in trees}
        gate.released.set()
        outcomes = await asyncio.gather(*tasks)
    await sampler.stop()
    workers = [tree for tree in trees if tree.name.startswith("worker")]
    worker_rss = sum(tree.peak_rss_mb for tree in workers)
    worker_pss = sum(tree.peak_pss_mb for tree in workers)
    worker_cpu = sum(cpu[tree.name] for tree in workers)
    listen = [o.listen_s for o in outcomes if o.listen_s is not None]
    greeted = [o.greeted_s for o in outcomes if o.greeted_s is not None]
    tools = [ms for o in outcomes for ms in o.tool_ms]
    errors = [o.error for o in outcomes if o.error]
    minutes = conversation_minutes(outcomes, window_end)
    bare = variant != "lexvoz"
    return {
        "agent": variant,
        "sessions": sessions,
        "got_agent": len(listen),
        "completed": None if bare else sum(1 for o in outcomes if o.completed == 2),
        "answered": sum(1 for o in outcomes if o.answered == 2) if bare else None,
        "evidence_lost": None if bare else sum(len(o.lost) for o in outcomes),
        "answers_without_evidence": dict(Counter(kind for o in outcomes for kind in o.not_completed)),
        "waited": sum(1 for o in outcomes if o.waited),
        "listen_p50_s": round(percentile(listen, 50), 2) if listen else None,
        "listen_p95_s": round(percentile(listen, 95), 2) if listen else None,
        "greeted_p50_s": round(percentile(greeted, 50), 2) if greeted else None,
        "greeted_p95_s": round(percentile(greeted, 95), 2) if greeted else None,
        "join_steps": join_steps(outcomes),
        "tool_p50_ms": round(percentile(tools, 50), 1) if tools else None,
        "tool_p95_ms": round(percentile(tools, 95), 1) if tools else None,
        "worker_processes": len(workers),
        "rss_mb_per_session": round(worker_rss / sessions, 1),
        "pss_mb_per_session": round(worker_pss / sessions, 1),
        "cpu_s_per_session_minute": round(worker_cpu / minutes, 2) if minutes > 0 else None,
        "conversation_minutes": round(minutes, 2),
        "talk_window_s": round(talk_window_s, 1),
        "programs": {t.name: {**t.figures(), "cpu_s": round(cpu[t.name], 2)} for t in trees},
        "errors": errors[:10],
        "error_count": len(errors),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/load.py", description=__doc__.split("\n")[0])
    p.add_argument("--sessions", type=int, default=25, help="simulated people at once (1-200)")
    p.add_argument("--ramp-s", type=float, default=0.0, help="spread the arrivals over this many seconds")
    p.add_argument("--timeout-s", type=float, default=120.0, help="bound on each step of each person")
    p.add_argument("--speed", type=float, default=8.0, help="the stand-in's speech pacing (1.0 = real time)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (one per core is the advice)")
    p.add_argument(
        "--max-jobs",
        type=int,
        default=None,
        help="LEXVOZ_MAX_JOBS per worker (default: room for all; with --queue, the worker's own default)",
    )
    p.add_argument("--worker-env", action="append", default=[], metavar="NAME=VALUE", help="extra worker setting")
    p.add_argument("--queue", action="store_true", help="people leave when done; the rest wait for a free agent")
    p.add_argument("--wait-s", type=float, default=900.0, help="with --queue: how long a person waits for an agent")
    p.add_argument("--rounds", type=int, default=1, help="rounds of each agent, alternating (figures: medians)")
    p.add_argument("--no-baseline", action="store_true", help="run Lexvoz only, without the bare agent's rounds")
    p.add_argument(
        "--tool-baseline",
        action="store_true",
        help="also the bare agent with a tool that answers at once: the same conversation's shape as Lexvoz's",
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--keep-logs", type=Path, default=None, help="copy the stack's logs here at the end")
    args = p.parse_args(argv)
    if not 1 <= args.sessions <= 200:
        p.error("--sessions must be between 1 and 200")
    if not 1 <= args.workers <= 16:
        p.error("--workers must be between 1 and 16")
    if not 1 <= args.rounds <= 20:
        p.error("--rounds must be between 1 and 20")
    # A queue is what a host with its default job limit does when more people come than it takes; room for all
    # would make it the all-at-once run instead.
    worker_env: dict[str, str] = {}
    if args.max_jobs is not None or not args.queue:
        worker_env["LEXVOZ_MAX_JOBS"] = str(args.max_jobs or -(-args.sessions // args.workers) + 1)
    for item in args.worker_env:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith(("LEXVOZ_", "OTEL_")):
            p.error(f"--worker-env wants LEXVOZ_NAME=VALUE, got {item!r}")
        worker_env[name] = value
    order = round_order(args.rounds, baseline=not args.no_baseline, tool_baseline=args.tool_baseline)
    lift_page_service_limits(args.sessions, len(order))
    load_start = os.getloadavg()
    host_reference = reference_in_subprocess()  # before the stack: the host's own speed, comparable across days
    runs = run_rounds(args, order, worker_env)
    lexvoz = combine_rounds([r for r in runs if r["agent"] == "lexvoz"])
    bare = combine_rounds([r for r in runs if r["agent"] == "bare"])
    bare_tool = combine_rounds([r for r in runs if r["agent"] == "bare_tool"])
    figures = {**lexvoz, "rounds": args.rounds}
    if len(runs) > 1:
        figures["per_round"] = runs
    if bare:
        figures = {**figures, "baseline": bare, **compare_with_bare(lexvoz, bare)}
    if bare_tool:
        figures = {**figures, "baseline_tool": bare_tool, **compare_with_bare(lexvoz, bare_tool, "bare_tool")}
    figures = {
        **figures,
        "round_order": order,
        "targets": TARGETS,
        "worker_env": worker_env,
        "standin_speed": args.speed,
        "queue": args.queue,
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "host_reference": host_reference,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(figures, ensure_ascii=False))
    served = figures["completed"] == args.sessions and figures["evidence_lost"] == 0
    baselines_served = all(not b or b["answered"] == args.sessions for b in (bare, bare_tool))
    return 0 if served and baselines_served else 1


def run_rounds(args: argparse.Namespace, order: Sequence[Variant], worker_env: dict[str, str]) -> list[dict[str, Any]]:
    """One stack for the whole run; each round a fresh worker of its variant, stopped before the next starts."""
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="lexvoz-load-") as tmp:
        base = Path(tmp)
        stack, cached, seeded = rehearsal_stack(base, speed=args.speed, worker_env=worker_env)
        stack.start()
        try:
            if not seeded:
                _save_index(stack.opts.data_dir, cached)
            queue_wait_s = args.wait_s if args.queue else None
            for n, variant in enumerate(order, start=1):
                workers = start_workers(stack, args.workers, variant, tag=f"-round-{n}")
                try:
                    figures = asyncio.run(
                        drive(stack, workers, args.sessions, args.timeout_s, args.ramp_s, queue_wait_s, variant)
                    )
                finally:
                    for proc in workers:
                        terminate(proc)
                runs.append({"round": n, **figures})
        finally:
            stack.stop()
            if args.keep_logs is not None:
                shutil.copytree(base / "log", args.keep_logs, dirs_exist_ok=True)
    return runs


def lift_page_service_limits(sessions: int, rounds: int = 1) -> None:
    """Every person asks the page service from 127.0.0.1: lift its per-address limits for this run only (the
    agent requests' follows the token requests'; people waiting re-ask for an agent every few seconds), and its
    whole-service caps. The stack's programs inherit this process's environment.

    `rounds`: workers run one after another against the same page service. A room that was joined and closed
    between two of its census reads still counts as a session nobody joined (for its token's lifetime), so the
    caps on those grow with every round's people, or a later round is refused with 429."""
    os.environ["LEXVOZ_TOKEN_REQUESTS_PER_MINUTE"] = str(min(1000, max(10, sessions * 15)))
    os.environ["LEXVOZ_MAX_CONVERSATIONS"] = str(max(50, sessions * 2 * rounds))
    os.environ["LEXVOZ_MAX_DISPATCHES_PER_MINUTE"] = str(max(60, sessions * 15))
    os.environ["LEXVOZ_MAX_PENDING_SESSIONS_PER_CLIENT"] = str(max(3, sessions * 2 * rounds))


def rehearsal_stack(
    base: Path, *, speed: float, worker_env: dict[str, str], standin_args: Sequence[str] = ()
) -> tuple[Stack, Path, bool]:
    """The whole stack in rehearsal mode on free loopback ports under `base`, with no worker: each round starts
    its own. Returns the stack (not started), the cached index's path and whether the index was seeded from it."""
    data_dir = base / "data"
    data_dir.mkdir()
    cached, seeded = _index_cache(data_dir)
    options = StackOptions(
        livekit_port=_livekit_port(),
        search_port=free_port(),
        web_port=free_port(),
        standin_port=free_port(),
        rehearsal=True,
        source=constitution.require(),
        data_dir=data_dir,
        log_dir=base / "log",
        ledger_path=base / "ledger.sqlite3",
        standin_args=["--speed", str(speed), "--fallback-transcript", SPOKEN_QUESTION, *standin_args],
        worker_env=worker_env,
        start_worker=False,
    )
    return Stack(options), cached, seeded


if __name__ == "__main__":
    raise SystemExit(main())
