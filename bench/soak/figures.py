"""The soak's figures, from what the people saw, what was injected, the ledger and the programs' samples.

Why each is defined as it is:
- a conversation is "hit" when a page-facing fault began or was still being cleared while it was open; it was
  told when the page showed a Spanish message for what went wrong (a `failed` research message, the session
  or voice model gone), or it needed none (a question asked or still open once the fault began was answered
  with evidence, or it asked nothing more); a hit conversation that waited in silence past 30 s, or whose
  questions since the fault all ended without evidence or a message, was not told;
- memory and descriptors are measured on each program's long-lived process, after a warm-up, on the
  incarnation that ran longest (a program restarted by a fault starts its figures over). A trend per hour is
  given only when that incarnation was watched for `MIN_TREND_MINUTES`: a program the faults restart every
  five minutes is only ever seen warming up after its restart (livekit-server's rooms coming back), and four
  minutes of that, extrapolated to an hour, once read as a 31 % leak. Such a program gets `trend_unmeasured`
  and the steady median of each of its lives instead, so growth that survives restarts still shows. The same
  holds for descriptors, judged as a level (`descriptors`), since they follow the connections open.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.ops.ledger.reader import read_room
from bench.soak.faults import Fault
from bench.soak.people import Question, Visit
from bench.soak.programs import Sample, Watched
from bench.stats import percentile

PAGE_FAULTS = frozenset({"search_killed", "search_slow", "model_dropped", "livekit_restarted", "worker_restarted"})
WARMUP_SHARE = 0.2
MIN_TREND_MINUTES = 15.0
GOALS: dict[str, Any] = {
    "evidence_lost": 0,
    "ledger_lost": 0,
    "failures_told": 1.0,
    "stuck_pages": 0,
    "worker_deaths": 0,
    "rss_growth_pct_per_hour": 5.0,
    "fd_growth": "flat",
    "recovery_p95_s": 10.0,
}
# livekit-agents' own error lines when a job process dies or hangs (ipc/supervised_proc.py, 1.8.9)
JOB_CRASH_SIGNS = (
    "process exited with non-zero exit code",
    "process is unresponsive, killing process",
    "did not ack shutdown in time",
    "process did not exit in time",
)


def hit_by(visit: Visit, fault: Fault) -> bool:
    end = visit.left_at if visit.left_at is not None else float("inf")
    cleared = fault.cleared_at if fault.cleared_at is not None else float("inf")
    return visit.opened_at <= cleared and fault.injected_at <= end


def told_or_recovered(visit: Visit, faults: list[Fault], stuck_after_s: float) -> bool:
    """The page said what went wrong, or needed not say anything (every question asked once the fault had begun
    was answered with evidence, or none was asked); never a wait longer than
    `stuck_after_s` with neither, and no evidence left unended."""
    if visit.stuck(stuck_after_s) or visit.lost:
        return False
    if visit.told or any(q.outcome == "failed" for q in visit.questions):
        return True
    began = min(f.injected_at for f in faults)
    after = [q for q in visit.questions if q.asked_at >= began or (q.ended_at or float("inf")) >= began]
    return not after or any(q.outcome == "completed" for q in after)


@dataclass(frozen=True)
class Recovery:
    """One cleared page-facing fault and the answer that ended its recovery, with the steps of that answer (seconds
    after clearing): when its person's agent joined and listened (None: before clearing), when they asked, when
    the research started, when it ended with evidence. `new_visit`: the person opened the page after the fault
    was injected (a page that started over, or a newcomer)."""

    kind: str
    cleared_s: float  # since the run began
    seconds: float
    asked_s: float
    started_s: float | None
    question: str
    new_visit: bool
    agent_s: float | None = None  # its person's agent joined (the last wait for one that ended before asking)
    listening_s: float | None = None  # that agent had greeted and listened (idem)

    def row(self) -> dict[str, Any]:
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(self).items()}


def recoveries(visits: list[Visit], faults: list[Fault], t0: float = 0.0) -> list[Recovery]:
    """For each cleared page-facing fault: from clearing to the first answer with evidence to a question asked
    after it (by anyone)."""
    answers = sorted(
        ((q.ended_at, q, v) for v in visits for q in v.questions if q.outcome == "completed" and q.ended_at),
        key=lambda a: a[0],
    )
    found = []
    for fault in faults:
        if fault.kind not in PAGE_FAULTS or (cleared := fault.cleared_at) is None:
            continue
        first = next(((q, v) for _, q, v in answers if q.asked_at >= cleared), None)
        if first is None:
            continue
        q, v = first
        assert q.ended_at is not None
        found.append(
            Recovery(
                kind=fault.kind,
                cleared_s=cleared - t0,
                seconds=q.ended_at - cleared,
                asked_s=q.asked_at - cleared,
                started_s=None if q.started_at is None else q.started_at - cleared,
                question=q.kind,
                new_visit=v.opened_at >= fault.injected_at,
                agent_s=_wait_ended(v, "agent", q, cleared),
                listening_s=_wait_ended(v, "agent listening", q, cleared),
            )
        )
    return found


def _wait_ended(visit: Visit, what: str, question: Question, cleared: float) -> float | None:
    """Seconds after clearing that the visit's last `what` wait before `question` ended well; None if before."""
    ends = [w.until for w in visit.waits if w.what == what and w.ended_by == "ok" and w.until <= question.asked_at]
    return ends[-1] - cleared if ends and ends[-1] >= cleared else None


def visit_story(visit: Visit, faults: list[Fault], t0: float) -> dict[str, Any]:
    """What a visit saw, in seconds since the run began, for the ones judged neither told nor recovered: enough to
    tell a page that was left uninformed from a person who left before the recovery showed (kinds and times only)."""

    def at(t: float | None) -> float | None:
        return None if t is None else round(t - t0, 2)

    return {
        "room": visit.room,
        "opened_s": at(visit.opened_at),
        "left_s": at(visit.left_at),
        "faults": [[f.kind, at(f.injected_at), at(f.cleared_at)] for f in faults],
        "questions": [
            [q.kind, at(q.asked_at), at(q.started_at), q.outcome or f"none:{q.told}", at(q.ended_at)]
            for q in visit.questions
        ],
        "told": [[at(t), kind.split(":")[0]] for t, kind in visit.told],
        "agents": len(visit.agents),
        "agent_left_s": [at(t) for t in visit.agent_left_at],
        "asked_again": visit.asked_again,
        "error": visit.error,
    }


def ledger_lost(visits: list[Visit], ledger_url: str) -> tuple[int, list[str]]:
    """Searches the page saw end (completed, failed or discarded) that the ledger has no row for."""
    missing: list[str] = []
    for visit in visits:
        if not visit.room or not visit.seen:
            continue
        kept = {row["call_id"] for row in read_room(ledger_url, visit.room)}
        missing += [f"{visit.room}/{call_id}" for call_id in visit.seen if call_id not in kept]
    return len(missing), missing[:10]


def _incarnations(samples: list[Sample]) -> list[list[Sample]]:
    runs: list[list[Sample]] = []
    for s in samples:
        if runs and runs[-1][-1].pid == s.pid:
            runs[-1].append(s)
        else:
            runs.append([s])
    return runs


def _steady(life: list[Sample]) -> list[Sample]:
    """A life's samples after its warm-up."""
    return life[int(len(life) * WARMUP_SHARE) :]


def growth(watched: Watched) -> dict[str, Any]:
    lives = _incarnations(watched.samples)
    run = max(lives, key=lambda life: life[-1].at - life[0].at) if lives else []
    if len(run) < 5:
        return {"samples": len(run)}
    steady = _steady(run)
    t = np.array([s.at for s in steady]) / 3600.0
    rss = np.array([s.rss_mb for s in steady])
    slope_mb_per_h = float(np.polyfit(t - t[0], rss, 1)[0]) if len(steady) >= 3 and t[-1] > t[0] else 0.0
    minutes = (steady[-1].at - steady[0].at) / 60
    figures: dict[str, Any] = {
        "rss_mb_start": round(float(rss[0]), 1),
        "rss_mb_end": round(float(rss[-1]), 1),
        "rss_growth_pct_per_hour": round(100 * slope_mb_per_h / float(np.median(rss)), 2),
        "fd_start": steady[0].fds,
        "fd_end": steady[-1].fds,
        "fd_max": max(s.fds for s in steady),
        **descriptors(steady),
        "incarnations": len({s.pid for s in watched.samples}),
        "minutes_measured": round(minutes, 1),
    }
    if minutes < MIN_TREND_MINUTES:
        figures["rss_growth_pct_per_hour"] = None
        restarted = " (restarted by the faults)" if len(lives) > 1 else ""
        figures["trend_unmeasured"] = (
            f"its longest life was watched for {minutes:.1f} min after warm-up{restarted}; "
            f"a trend per hour needs {MIN_TREND_MINUTES:.0f}"
        )
        figures["rss_mb_steady_by_life"] = _steady_by_life(lives, lambda s: s.rss_mb)
        figures["fd_flat"] = None
        figures["fd_steady_by_life"] = _steady_by_life(lives, lambda s: s.fds)
    return figures


def _steady_by_life(lives: list[list[Sample]], value: Callable[[Sample], float]) -> list[float]:
    """The median of `value` over each life's steady samples (lives too short to have any are left out)."""
    return [round(float(np.median([value(s) for s in _steady(life)])), 1) for life in lives if len(life) >= 5]


def descriptors(steady: list[Sample]) -> dict[str, Any]:
    """Descriptor growth as a level, not as two instants: the median of the last quarter of the steady samples
    against the first quarter's. A server's open descriptors follow its live connections (livekit-server's rise
    and fall with rooms and their transports), so the last sample minus the first says how many people were
    connected at those two moments (once +10 over a 4-minute life). Flat: the end level is within the range
    already seen at the start; a leak of one descriptor a minute is not, after an hour."""
    quarter = max(1, len(steady) // 4)
    first = [s.fds for s in steady[:quarter]]
    last = [s.fds for s in steady[-quarter:]]
    end_level = float(np.median(last))
    return {"fd_growth": round(end_level - float(np.median(first)), 1), "fd_flat": end_level <= max(first)}


def figures(
    *,
    minutes: float,
    conversations: int,
    visits: list[Visit],
    faults: list[Fault],
    ledger_url: str,
    watched: dict[str, Watched],
    unplanned_exits: list[tuple[str, int, int | None]],
    job_crashes: int,
    stuck_after_s: float,
    t0: float,
) -> dict[str, Any]:
    page_faults = [f for f in faults if f.kind in PAGE_FAULTS]
    hit = [(v, [f for f in page_faults if hit_by(v, f)]) for v in visits]
    hit = [(v, fs) for v, fs in hit if fs]
    told = [v for v, fs in hit if told_or_recovered(v, fs, stuck_after_s)]
    questions = [q for v in visits for q in v.questions]
    lost_count, lost_examples = ledger_lost(visits, ledger_url)
    recovered = recoveries(visits, faults, t0)
    recovery = [r.seconds for r in recovered]
    stuck = [
        (v.room, w.what, round(w.since - t0, 1), round(w.until - w.since, 1), w.seen)
        for v in visits
        for w in v.stuck(stuck_after_s)
    ]
    programs = {name: growth(w) for name, w in watched.items()}
    return {
        "minutes": minutes,
        "conversations": conversations,
        "visits": len(visits),
        "questions": len(questions),
        "answered": sum(1 for q in questions if q.outcome == "completed"),
        "outcomes": dict(Counter(q.outcome or f"none:{q.told}" for q in questions)),
        "failed_reasons": dict(Counter(q.reason for q in questions if q.outcome == "failed")),
        "evidence_lost": sum(len(v.lost) for v in visits),
        "evidence_lost_examples": [f"{v.room}/{c}" for v in visits for c in v.lost][:10],
        "evidence_cut": sum(len(v.cut) for v in visits),
        "ledger_lost": lost_count,
        "ledger_lost_examples": lost_examples,
        "faults": dict(Counter(f.kind for f in faults)),
        "fault_errors": [f"{f.kind}: {f.error}" for f in faults if f.error],
        "models_dropped_mid_answer": sum(1 for f in faults if f.kind == "model_dropped" and f.detail.get("mid_answer")),
        "hit_conversations": len(hit),
        "failures_told": round(len(told) / len(hit), 3) if hit else None,
        "not_told": [v.room for v, _ in hit if v not in told][:10],
        "not_told_detail": [visit_story(v, fs, t0) for v, fs in hit if v not in told][:10],
        "messages_shown": dict(Counter(kind.split(":")[0] for v in visits for _, kind in v.told)),
        "asked_again": sum(v.asked_again for v in visits),
        "stuck_pages": len(stuck),
        "stuck_examples": stuck[:10],
        "worker_deaths": len(unplanned_exits),
        "worker_deaths_detail": unplanned_exits[:10],
        "job_crashes": job_crashes,
        "injected_worker_deaths": sum(1 for f in faults if f.kind == "worker_restarted"),
        "recovery_p50_s": round(percentile(recovery, 50), 2) if recovery else None,
        "recovery_p95_s": round(percentile(recovery, 95), 2) if recovery else None,
        "recovery_max_s": round(max(recovery), 2) if recovery else None,
        "recovery_by_kind_max_s": {
            kind: round(max(r.seconds for r in recovered if r.kind == kind), 2)
            for kind in dict.fromkeys(r.kind for r in recovered)  # in the order the faults came, as before
        },
        "recovery_samples": [r.row() for r in recovered],
        "fault_timeline": [
            (f.kind, round(f.injected_at - t0, 1), round(f.cleared_at - t0, 1) if f.cleared_at else None)
            for f in faults
        ],
        "rss_growth_pct_per_hour": {n: p.get("rss_growth_pct_per_hour") for n, p in programs.items()},
        "fd_growth": {n: p.get("fd_growth") for n, p in programs.items()},
        "programs": programs,
        "visit_errors": [v.error for v in visits if v.error][:10],
    }


def count_job_crashes(log_dir: Path) -> int:
    """Job processes that ended abnormally, as the workers' own logs say (livekit-agents logs each)."""
    crashes = 0
    for log in log_dir.glob("worker-*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if any(sign in line for sign in JOB_CRASH_SIGNS):
                crashes += 1
    return crashes


def missed_goals(fig: dict[str, Any], *, long_run: bool) -> list[str]:
    """The goals this run missed; memory and descriptor trends only count on runs long enough to show one."""
    missed = []
    for name in ("evidence_lost", "ledger_lost", "stuck_pages", "worker_deaths"):
        if fig[name] != 0:
            missed.append(f"{name} = {fig[name]}")
    if fig["failures_told"] is not None and fig["failures_told"] < 1.0:
        missed.append(f"failures_told = {fig['failures_told']}")
    if fig["fault_errors"]:
        missed.append(f"faults not injected or cleared: {fig['fault_errors']}")
    if fig["recovery_p95_s"] is None or fig["recovery_p95_s"] > GOALS["recovery_p95_s"]:
        missed.append(f"recovery_p95_s = {fig['recovery_p95_s']}")
    if long_run:
        for name, pct in fig["rss_growth_pct_per_hour"].items():
            if pct is not None and pct >= GOALS["rss_growth_pct_per_hour"]:
                missed.append(f"{name} memory grows {pct} % per hour")
        for name, program in fig["programs"].items():
            if program.get("fd_flat") is False:
                missed.append(f"{name} descriptors grow by {program['fd_growth']}")
    return missed
