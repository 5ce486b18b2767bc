"""Voice-to-voice overhead: Lexvoz's own share of the time from the end of a person's speech to the agent's voice.

`python bench/latency.py` starts the stack in rehearsal mode (livekit-server, the search server, the Realtime
stand-in, the page service; as `bench/load.py` does), then for each size (`--sizes 1,10`: conversations at once)
runs a fresh Lexvoz worker and a fresh bare livekit-agents agent (`bench/bare_agent.py`) in turn (`--rounds R`
of each, alternating). People join one after another (each waits for the greeting), then all of them speak
`--turns` questions aloud, each waiting for the spoken answer to end before the next.

For each spoken question:

- `total`: from the stand-in writing `input_audio_buffer.speech_stopped` (the end of the person's speech as the
  model hears it) to the onset of the answer's voice reaching the person in this process;
- `model`: the stand-in's own time within it, as the stand-in reports it (`/control/timings`): for each response
  of the turn, from its request (the `speech_stopped` itself for the response the server creates, or the client's
  `response.create` as read off the socket) to its answer being written (the function call's
  `response.output_item.done`, or the first `response.output_audio.delta`);
- `overhead` = `total - model`: what the agent side adds: the worker (for Lexvoz, the tool call through the gateway
  and the search server between the function call and the next `response.create`), livekit-server, the WebRTC
  path and this process receiving the frame;
- `audio_path`: the part of `overhead` after the stand-in wrote the first audio delta (decode, resample, publish,
  the room, receive). `overhead - audio_path` is what happens before the model may speak (for Lexvoz, the tool).

Which onset is the answer's: each person's side keeps every onset of the agent's voice (the first loud frame after
a gap, `tests.person.AgentAudioWatch`), not one "heard" time per question, because on a saturated host the first
loud frame after a question can be the previous line's tail. A question's turn is the first `speech_stopped` after
it on that person's connection; the responses answering it are those the stand-in tied to that speech's item (by
id, `response_created`); the answer is the first of them to write audio, and what was heard of it is the first
onset at or after that first audio (`split_turn`). A question that cannot be split so is counted by reason
(`unmatched`: no `speech_stopped`, no response with audio, no onset within `ONSET_WITHIN_S`, or not asked because
the person's talk ended on an error), never dropped silently; `matched` of `questions` is the sample size of the
figures.

It prints one JSON line and writes `bench/results/latency.json`: per size, p50/p95 of each for Lexvoz and the
bare agent, and `ratio_p50` / `ratio_p95` (Lexvoz's overhead over the bare agent's). Goal: overhead p95 ≤ 150 ms
and ≤ 1.10x the bare agent's. The bare agent has no tool, so Lexvoz's tool time is part of its overhead and none
of the bare agent's; `audio_ratio_p50` / `audio_ratio_p95` compare the audio paths alone. So a third agent runs
too (`--no-tool-baseline` skips it): the bare agent with one tool that answers at once without I/O
(`bench/bare_agent.py`, `BARE_AGENT_TOOL`), whose overhead holds what livekit-agents itself spends on a tool turn;
`tool_ratio_p50` / `tool_ratio_p95` are Lexvoz's overhead over that agent's, and `before_audio` of the two
differ by what Lexvoz's own tool path adds (the gateway, the search server, the research session).

Clock: `time.monotonic()` in both processes (the stand-in's `TurnTimings` and this process's watch), which on
Linux is CLOCK_MONOTONIC, one clock for the whole host, not per process; the benchmark runs every program on this
host, and `tests/test_bench_latency.py` checks the reading across two processes. Every wait is bounded
(`--timeout-s`); everything listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/latency.py` from the repository root
    sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from agent.devstack.processes import terminate  # noqa: E402
from agent.devstack.stack import Stack  # noqa: E402
from bench.hostspeed import reference_in_subprocess  # noqa: E402
from bench.load import (  # noqa: E402
    Variant,
    _save_index,
    lift_page_service_limits,
    rehearsal_stack,
    round_order,
    start_workers,
)
from bench.stats import percentile  # noqa: E402
from tests.person import ONSET_GAP_S, AgentAudioWatch, Person  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "latency.json"
TARGETS = {"overhead_p95_ms": 150.0, "ratio_vs_bare": 1.10}
CLOCK = "time.monotonic (CLOCK_MONOTONIC: one clock for every process of the host)"
# The stand-in reads its clock just after its socket write of the first audio returns; a few milliseconds of
# preemption between the two on a busy host could let the fastest path seem to arrive before it. An onset this
# much before the first audio still counts as hearing it; a previous line's tail, which needs ONSET_GAP_S of
# silence before it to be an onset at all, would have to land in this window to be mistaken for the answer.
CLOCK_TOLERANCE_S = 0.005
# An answer not heard within this long after the stand-in wrote its first audio counts as not heard: twice the p95
# audio path measured at 10 conversations on a saturated 2-core host (15 s), and a bound for a person's last
# question, which has no later answer to bound it.
ONSET_WITHIN_S = 30.0
# Why a question was not split; `not_asked`: the person's talk ended on an error (a wait timed out, the room
# failed) before it asked all its questions, so those are counted too.
# "several_turns": the stand-in heard one question as more than one turn (a pause long enough to end a turn inside
# it, as a load generator starved of CPU leaves in its audio), so which of them the answer belongs to is a guess.
UNMATCHED_REASONS = ("no_speech_stopped", "no_response", "several_turns", "no_onset", "not_asked")


@dataclass(frozen=True)
class TurnSplit:
    """One spoken question's voice-to-voice time, split into the stand-in's share and the agent side's (seconds)."""

    total_s: float
    model_s: float
    audio_path_s: float

    @property
    def overhead_s(self) -> float:
        return self.total_s - self.model_s

    @property
    def before_audio_s(self) -> float:
        """The agent side's share before the model could speak (Lexvoz: the tool call and its answer)."""
        return self.overhead_s - self.audio_path_s


def split_turn(
    entries: Sequence[dict[str, Any]],
    spoke_at: float,
    onsets: Sequence[float],
    *,
    next_spoke_at: float = math.inf,
    within_s: float = ONSET_WITHIN_S,
) -> TurnSplit | str:
    """Split the question asked at `spoke_at` (the next one at `next_spoke_at`), from the stand-in's timing
    entries of that person's connection and the onsets of the agent's voice that person heard (monotonic).

    The turn is the first `speech_stopped` between the two questions (the person has no stand-in id for what it
    said, so this one is found by time). Its responses are those the stand-in tied to that speech's item
    (`response_created`), whoever asked for them; its answer is the first of them to write audio. What was heard
    of it is the first onset at or after that first audio (less `CLOCK_TOLERANCE_S`): an onset before the answer
    was written is earlier audio (a previous line's tail), whatever order the person heard things in. It must come
    before the next response's first audio on the connection (this turn's or another's: an onset after that could
    be that response's) and within `within_s`. When the turn cannot be split, the reason (one of
    `UNMATCHED_REASONS`): an ambiguous turn is counted, never given a time that may be another line's."""
    ordered = sorted(entries, key=lambda e: float(e["at"]))
    stops = [e for e in ordered if e["kind"] == "speech_stopped" and spoke_at <= e["at"] < next_spoke_at]
    if not stops:
        return "no_speech_stopped"
    stopped = stops[0]
    t_stop, item = float(stopped["at"]), stopped.get("item_id")
    mine = {
        str(e["response_id"])
        for e in ordered
        if e["kind"] == "response_created" and item is not None and e.get("item_id") == item
    }
    audio = [e for e in ordered if e["kind"] == "first_audio" and str(e["response_id"]) in mine]
    if not audio:
        return "several_turns" if len(stops) > 1 else "no_response"
    final = audio[0]
    t_audio = float(final["at"])
    later_audio = [float(e["at"]) for e in ordered if e["kind"] == "first_audio" and float(e["at"]) > t_audio]
    until = min([t_audio + within_s, *later_audio])
    heard = next((t for t in sorted(onsets) if t_audio - CLOCK_TOLERANCE_S <= t < until), None)
    if heard is None:
        return "no_onset"
    requested = {
        str(e["response_id"]): float(e["at"])
        for e in ordered
        if e["kind"] == "response_create" and str(e["response_id"]) in mine
    }
    answers = [
        e for e in ordered if e["kind"] == "function_call" and str(e["response_id"]) in mine and e["at"] <= t_audio
    ]
    # A response the client did not ask for is the one the server created when the speech stopped.
    model = sum(float(a["at"]) - requested.get(str(a["response_id"]), t_stop) for a in [*answers, final])
    return TurnSplit(total_s=heard - t_stop, model_s=model, audio_path_s=heard - t_audio)


def summarize(splits: Sequence[TurnSplit]) -> dict[str, Any]:
    """p50/p95 in milliseconds of each part, over the turns of one agent at one size."""
    figures: dict[str, Any] = {"matched": len(splits)}
    for name in ("overhead", "audio_path", "before_audio", "model", "total"):
        values = [getattr(s, f"{name}_s") * 1000 for s in splits]
        figures[f"{name}_p50_ms"] = round(percentile(values, 50), 1) if values else None
        figures[f"{name}_p95_ms"] = round(percentile(values, 95), 1) if values else None
    return figures


def compare(
    lexvoz: dict[str, Any], bare: dict[str, Any], bare_tool: dict[str, Any] | None = None
) -> dict[str, float | None]:
    """Lexvoz over the bare agent: the overhead, and the audio path alone; with `bare_tool`, the overhead over
    the bare agent's with a tool that answers at once."""
    out: dict[str, float | None] = {}
    pairs = [("overhead", "ratio", bare), ("audio_path", "audio_ratio", bare)]
    if bare_tool is not None:
        pairs.append(("overhead", "tool_ratio", bare_tool))
    for key, name, other in pairs:
        for pct in ("p50", "p95"):
            mine, theirs = lexvoz.get(f"{key}_{pct}_ms"), other.get(f"{key}_{pct}_ms")
            out[f"{name}_{pct}"] = round(mine / theirs, 3) if mine is not None and theirs else None
    return out


@dataclass
class Talk:
    """One person's side of a round: when each question began and every onset of the agent's voice it heard."""

    connection: int
    spoke_at: list[float]
    onsets: list[float]
    error: str | None = None  # what ended the talk early, if anything


def match_talk(entries: Sequence[dict[str, Any]], talk: Talk) -> list[TurnSplit | str]:
    """Each question of `talk`, split or the reason it could not be (see `split_turn`)."""
    bounds = [*talk.spoke_at[1:], math.inf]
    return [
        split_turn(entries, at, talk.onsets, next_spoke_at=following)
        for at, following in zip(talk.spoke_at, bounds, strict=True)
    ]


async def _timings(http: aiohttp.ClientSession, standin_url: str, since: int = 0) -> dict[str, Any]:
    async with http.get(f"{standin_url}/control/timings", params={"since": str(since)}) as resp:
        resp.raise_for_status()
        body: dict[str, Any] = await resp.json()
        return body


async def _talk(person: Person, connection: int, turns: int, delay_s: float, timeout_s: float) -> Talk:
    """`turns` spoken questions, each answered to the end before the next, with the agent's voice watched
    throughout: every onset is kept, and which one answered which question is decided afterwards."""
    await asyncio.sleep(delay_s)  # the people of one size do not all speak in the same 100 ms
    track = await person.wait_for(person.agent_audio_track, "agent audio track", timeout_s)
    watch = AgentAudioWatch(track)
    watch.start()
    talk = Talk(connection, [], [])
    try:
        for _ in range(turns):
            spoke_at = time.monotonic()
            talk.spoke_at.append(spoke_at)
            await person.mic.speak()
            await person.wait_for(lambda at=spoke_at: person.spoke_since(at), "spoken answer", timeout_s)
            await person.wait_until_listening(timeout_s)
        # "listening" comes when the worker's playout ended, while the last answer may still be on its way through
        # the room: wait (bounded) until as many onsets were heard as questions were asked. When one answer ran
        # into the one before it without a gap there are fewer, and that turn is reported as not heard.
        await watch.wait_for_onsets(turns, talk.spoke_at[0], timeout_s)
    except Exception as exc:  # the questions asked so far are still matched, the others counted as not asked
        talk.error = f"{type(exc).__name__}: {exc}"
    finally:
        await watch.aclose()
        talk.onsets.extend(at for at, _ in watch.onsets)
    return talk


@dataclass
class Tally:
    """The turns of one agent at one size: the split ones, and how many could not be split, by reason."""

    splits: list[TurnSplit] = field(default_factory=list)
    unmatched: dict[str, int] = field(default_factory=lambda: dict.fromkeys(UNMATCHED_REASONS, 0))

    def add(self, outcomes: Sequence[TurnSplit | str]) -> None:
        for outcome in outcomes:
            if isinstance(outcome, TurnSplit):
                self.splits.append(outcome)
            else:
                self.unmatched[outcome] += 1

    def add_talk(self, entries: Sequence[dict[str, Any]], talk: Talk, turns: int) -> None:
        """A person's `turns` questions: those it asked, matched against its connection's `entries`; the rest (its
        talk ended early) as not asked."""
        self.add(match_talk(entries, talk))
        self.add(["not_asked"] * (turns - len(talk.spoke_at)))

    def merge(self, other: Tally) -> None:
        self.splits.extend(other.splits)
        for reason, count in other.unmatched.items():
            self.unmatched[reason] += count

    def figures(self) -> dict[str, Any]:
        questions = len(self.splits) + sum(self.unmatched.values())
        return {"questions": questions, **summarize(self.splits), "unmatched": dict(self.unmatched)}


async def measure(stack: Stack, variant: Variant, size: int, turns: int, timeout_s: float) -> tuple[Tally, list[str]]:
    """One round: `size` people with one agent each, `turns` spoken questions each. Returns the tally of the
    turns (split, or not and why) and errors."""
    people: list[Person] = []
    errors: list[str] = []
    async with aiohttp.ClientSession() as http:
        start = await _timings(http, stack.standin_url)
        first_connection = int(start["connections"]) + 1
        try:
            # One after another, so that the n-th person of the round is the stand-in's n-th new connection.
            for n in range(size):
                person = await Person.from_page_service(stack.web_url, http, lexvoz=variant == "lexvoz")
                people.append(person)
                await asyncio.wait_for(person.connect(), timeout_s)
                await person.wait_until_listening(timeout_s)
                seen = int((await _timings(http, stack.standin_url))["connections"])
                if seen != first_connection + n:
                    raise RuntimeError(f"the stand-in has {seen} connections, expected {first_connection + n}")
            talks = [_talk(p, first_connection + n, turns, 0.25 * n, timeout_s) for n, p in enumerate(people)]
            results = await asyncio.gather(*talks, return_exceptions=True)
            timed = await _timings(http, stack.standin_url, int(start["next"]))
        finally:
            for person in people:
                try:
                    await asyncio.wait_for(person.aclose(), 10)
                except Exception as exc:  # a slow disconnect does not change what was measured
                    errors.append(f"close: {type(exc).__name__}")
    by_connection: dict[int, list[dict[str, Any]]] = {}
    for entry in timed["entries"]:
        by_connection.setdefault(int(entry["connection"]), []).append(entry)
    tally = Tally()
    for result in results:
        if isinstance(result, BaseException):
            errors.append(f"{type(result).__name__}: {result}")
            tally.add(["not_asked"] * turns)
            continue
        if result.error is not None:
            errors.append(result.error)
        tally.add_talk(by_connection.get(result.connection, []), result, turns)
    return tally, errors


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/latency.py", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1,10", help="conversations at once, comma-separated")
    p.add_argument("--turns", type=int, default=8, help="spoken questions per person per round")
    p.add_argument("--rounds", type=int, default=1, help="rounds of each agent per size, alternating")
    p.add_argument("--speed", type=float, default=8.0, help="the stand-in's speech pacing (1.0 = real time)")
    p.add_argument("--timeout-s", type=float, default=60.0, help="bound on each wait of each person")
    p.add_argument("--no-tool-baseline", action="store_true", help="skip the bare agent with a tool")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        p.error("--sizes wants numbers separated by commas, e.g. 1,10")
    if not sizes or not all(1 <= s <= 50 for s in sizes):
        p.error("--sizes must be between 1 and 50")
    if not 1 <= args.turns <= 50 or not 1 <= args.rounds <= 20:
        p.error("--turns must be between 1 and 50 and --rounds between 1 and 20")
    variants = round_order(1, baseline=True, tool_baseline=not args.no_tool_baseline)
    lift_page_service_limits(max(sizes), rounds=len(variants) * args.rounds * len(sizes))
    load_start = os.getloadavg()
    host_reference = reference_in_subprocess()
    worker_env = {"LEXVOZ_MAX_JOBS": str(max(sizes) + 1)}
    tallies: dict[tuple[int, Variant], Tally] = {}
    errors: list[str] = []
    order: list[tuple[int, Variant]] = [(size, v) for size in sizes for v in variants * args.rounds]
    with tempfile.TemporaryDirectory(prefix="lexvoz-latency-") as tmp:
        stack, cached, seeded = rehearsal_stack(Path(tmp), speed=args.speed, worker_env=worker_env)
        stack.start()
        try:
            if not seeded:
                _save_index(stack.opts.data_dir, cached)
            for n, (size, variant) in enumerate(order, start=1):
                workers = start_workers(stack, 1, variant, tag=f"-latency-{n}")
                try:
                    tally, errs = asyncio.run(measure(stack, variant, size, args.turns, args.timeout_s))
                finally:
                    for proc in workers:
                        terminate(proc)
                tallies.setdefault((size, variant), Tally()).merge(tally)
                errors.extend(f"{variant}@{size}: {e}" for e in errs)
        finally:
            stack.stop()
    results = []
    for size in sizes:
        figs = {v: tallies.get((size, v), Tally()).figures() for v in variants}
        ratios = compare(figs["lexvoz"], figs["bare"], figs.get("bare_tool"))
        results.append({"conversations": size, **figs, **ratios})
        for name, fig in figs.items():
            print(
                f"{name}@{size}: overhead p50 {fig['overhead_p50_ms']} ms, p95 {fig['overhead_p95_ms']} ms over "
                f"{fig['matched']} of {fig['questions']} questions; unmatched {fig['unmatched']}",
                file=sys.stderr,
            )
    figures = {
        "results": results,
        "turns_per_person": args.turns,
        "rounds": args.rounds,
        "round_order": [f"{variant}@{size}" for size, variant in order],
        "targets": TARGETS,
        "clock": CLOCK,
        "clock_tolerance_ms": CLOCK_TOLERANCE_S * 1000,
        "onset_gap_ms": ONSET_GAP_S * 1000,
        "onset_within_s": ONSET_WITHIN_S,
        "standin_speed": args.speed,
        "errors": errors[:10],
        "error_count": len(errors),
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "host_reference": host_reference,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(figures, ensure_ascii=False))
    complete = all(
        r[v]["matched"] == size * args.turns * args.rounds
        for r, size in zip(results, sizes, strict=True)
        for v in variants
    )
    return 0 if complete and not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
