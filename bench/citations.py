"""How well the citation check reads what the agent says: recall, false flags and time per sentence.

Two kinds of lines are checked with the product's `CitationCheck`:

- hand-written answer sentences, one JSON object a line: {"id", "text", "sources": [citation strings delivered
  to the model], "citations": [{"norm": str|null, "article": "74", "in_sources": bool}]}; each sentence is its own
  conversation (its sources delivered, then its text checked). The path is the first argument; by default
  bench/citations/sentences.jsonl, or the development set bench/citations/dev_sentences.jsonl when that is absent.
- the agent lines of the offline evals: every scenario of tests/evals/scenarios.py played with the scripted model
  (well-behaved and with each of its flaws) through the evals' own rig, so the lines and the sources are what the
  evals see. Sources are delivered in the order the conversation received them, and each assistant line is
  checked after the tool outputs before it. Their gold is read off the script: a source citation the line repeats
  word for word is a citation in the sources; the scripted inventions (behaviours.py) are listed below with the
  citation a listener hears in them. A line whose citations the gold does not explain shows in `unexplained`.

Scoring, per line: a gold citation is found when the check reports the same article (suffix included) of the same
norm key (`norm_key` of the gold norm, its folded name when it has none, null for none; "ley 6" and "ley 6 de 2002"
are the same norm, as in the check's matching); `recall` = found / gold. `false_flags` counts the gold
citations in the sources that the check marks not verified, plus every citation the check reports that is not in
the gold (to the user a spurious citation is a false alarm too). `missed_flags` counts gold citations outside the
sources that the check nevertheless verified. `ms_per_sentence` is `time.perf_counter` over delivering and checking
the whole set (sentences and eval lines), divided by the number of lines: the median of `--passes` passes.

One JSON line on stdout, the same in bench/results/citations.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/citations.py` from the repository root
    sys.path.insert(0, str(ROOT))

from agent.voice.citations import CitationCheck, article_key, fold, norm_key, norms_match  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "citations.json"
SENTENCES = ROOT / "bench" / "citations" / "sentences.jsonl"
DEV_SENTENCES = ROOT / "bench" / "citations" / "dev_sentences.jsonl"
GOAL_RECALL = 0.98
GOAL_MS_PER_SENTENCE = 1.0

Gold = tuple[str | None, str, bool]  # (norm as written, article, in the sources)


@dataclass
class Conversation:
    """One conversation to check: steps in order, each a delivery or a line the agent says with its gold."""

    id: str
    steps: list[tuple[str, Any]] = field(default_factory=list)

    def deliver(self, call_id: str, citations: list[str]) -> None:
        self.steps.append(("deliver", (call_id, citations)))

    def say(self, line_id: str, text: str, gold: list[Gold]) -> None:
        self.steps.append(("say", (line_id, text, gold)))


def read_sentences(path: Path) -> list[Conversation]:
    out = []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        row = json.loads(raw)
        conv = Conversation(str(row.get("id", n)))
        conv.deliver("sources", [str(s) for s in row.get("sources", [])])
        gold = [(c.get("norm"), str(c["article"]), bool(c["in_sources"])) for c in row.get("citations", [])]
        conv.say(conv.id, str(row["text"]), gold)
        out.append(conv)
    return out


# -- the eval scenarios' agent lines ------------------------------------------------------------------------


def _scripted_gold(text: str, delivered: list[str]) -> list[Gold]:
    """What a listener hears cited in a scripted line (see the module docstring)."""
    from tests.evals import behaviours

    gold: list[Gold] = []
    said_sources: list[tuple[int, str]] = []
    for citation in dict.fromkeys(delivered):
        start = text.find(citation)
        while start >= 0:
            said_sources.append((start, citation))
            start = text.find(citation, start + len(citation))
    for _, citation in sorted(said_sources):
        norm, _, article = citation.rpartition(", artículo ")
        gold.append((norm, article, True))
    if behaviours.INVENTED_CITATION in text:  # "la Constitución Política de la República de Panamá, artículo 17"
        gold.append(("Constitución", "17", False))
    if behaviours.INVENTED_ARTICLE in text:  # "el artículo 99 de la misma ley": the law the line cited last
        at = text.find(behaviours.INVENTED_ARTICLE)
        before = [c for start, c in sorted(said_sources) if start < at]
        gold.append((before[-1].rpartition(", artículo ")[0] if before else None, "99", False))
    if "Según la Ley 200 de 2031, artículo 14, se renueva" in text:  # the answer given before searching
        gold.append(("Ley 200 de 2031", "14", False))
    return gold


async def _eval_conversations() -> list[Conversation]:
    from livekit.agents.voice.run_result import ChatMessageEvent, FunctionCallOutputEvent

    from tests.evals.behaviours import ScriptedModel
    from tests.evals.rig import conversation
    from tests.evals.scenarios import SCENARIOS

    out: list[Conversation] = []
    for scenario in SCENARIOS:
        for flaw in [None, *scenario.flaws]:
            conv = Conversation(f"eval:{scenario.id}:{flaw or 'good'}")
            delivered: list[str] = []
            model = ScriptedModel(flaw)
            async with conversation(model, greet=scenario.greet, mcp_timeout_s=scenario.mcp_timeout_s) as rig:
                await scenario.play(rig)
            runs = ([rig.greeting] if rig.greeting is not None else []) + rig.turns
            for t, run in enumerate(runs):
                for e, event in enumerate(run.events):
                    if isinstance(event, FunctionCallOutputEvent) and not event.item.is_error:
                        citations = _output_citations(event.item.output)
                        delivered.extend(citations)
                        conv.deliver(event.item.call_id, citations)
                    elif isinstance(event, ChatMessageEvent) and event.item.role == "assistant":
                        text = event.item.text_content or ""
                        conv.say(f"{conv.id}:{t}.{e}", text, _scripted_gold(text, delivered))
            out.append(conv)
    return out


def _output_citations(output: str) -> list[str]:
    try:
        body = json.loads(output)
    except ValueError:
        return []
    sources = body.get("fuentes") if isinstance(body, dict) else None
    return [str(s["citation"]) for s in sources or [] if isinstance(s, dict) and s.get("citation")]


# -- scoring --------------------------------------------------------------------------------------------------


def _gold_norm(norm: str | None) -> str | None:
    return None if norm is None else (norm_key(norm) or fold(norm))


def _same_norm(found: str | None, gold: str | None) -> bool:
    """The same norm key, a numbered norm said without its year being that norm of any year (as the check has it)."""
    return found == gold or (found is not None and gold is not None and norms_match(found, gold))


def run(conversations: list[Conversation]) -> list[tuple[str, str, list[Gold], list[tuple[str | None, str, bool]]]]:
    """Every line with its gold and what the check reported: (norm key, article, verified)."""
    lines = []
    for conv in conversations:
        check = CitationCheck()
        for kind, step in conv.steps:
            if kind == "deliver":
                check.deliver(*step)
            else:
                line_id, text, gold = step
                found = [(c.citation.norm, c.citation.article, c.verified) for c in check.check(text)]
                lines.append((line_id, text, gold, found))
    return lines


def time_pass(conversations: list[Conversation]) -> float:
    start = time.perf_counter()
    for conv in conversations:
        check = CitationCheck()
        for kind, step in conv.steps:
            if kind == "deliver":
                check.deliver(*step)
            else:
                check.check(step[1])
    return time.perf_counter() - start


def score(lines: list[tuple[str, str, list[Gold], list[tuple[str | None, str, bool]]]]) -> dict[str, Any]:
    gold_total = found_total = false_flags = missed_flags = 0
    missed: list[str] = []
    flagged: list[str] = []
    spurious: list[str] = []
    for line_id, _, gold, found in lines:
        left = list(found)
        for norm, article, in_sources in gold:
            gold_total += 1
            want_norm, want_article = _gold_norm(norm), article_key(article)
            hit = next((f for f in left if article_key(f[1]) == want_article and _same_norm(f[0], want_norm)), None)
            if hit is None:
                missed.append(f"{line_id}: {norm} {article}")
                continue
            left.remove(hit)
            found_total += 1
            if in_sources and not hit[2]:
                false_flags += 1
                flagged.append(f"{line_id}: {norm} {article}")
            elif not in_sources and hit[2]:
                missed_flags += 1
        for norm_found, article_found, _ in left:
            false_flags += 1
            spurious.append(f"{line_id}: {norm_found} {article_found}")
    return {
        "recall": round(found_total / gold_total, 4) if gold_total else None,
        "false_flags": false_flags,
        "missed_flags": missed_flags,
        "citations": gold_total,
        "found": found_total,
        "missed": missed,
        "flagged_in_sources": flagged,
        "spurious": spurious,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", nargs="?", type=Path, help="the sentences (JSONL)")
    parser.add_argument("--no-evals", action="store_true", help="leave out the eval scenarios' agent lines")
    parser.add_argument("--passes", type=int, default=5, help="timed passes over the whole set (median kept)")
    args = parser.parse_args()
    path: Path = (args.path or (SENTENCES if SENTENCES.exists() else DEV_SENTENCES)).resolve()
    sentences = read_sentences(path)
    evals = [] if args.no_evals else asyncio.run(_eval_conversations())
    conversations = sentences + evals
    lines = run(conversations)
    eval_lines = run(evals)
    seconds = statistics.median(time_pass(conversations) for _ in range(max(1, args.passes)))
    result: dict[str, Any] = {"bench": "citations"}
    overall = score(lines)
    result.update({k: overall[k] for k in ("recall", "false_flags", "missed_flags")})
    result["ms_per_sentence"] = round(seconds * 1000 / max(1, len(lines)), 4)
    result.update(
        {
            "sentences": len(lines),
            "citations": overall["citations"],
            "found": overall["found"],
            "goal_recall": GOAL_RECALL,
            "goal_ms_per_sentence": GOAL_MS_PER_SENTENCE,
            "set": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name),
            "set_sentences": len(sentences),
            "eval_lines": len(eval_lines),
            "by_part": {
                "sentences": _summary(score(run(sentences))),
                "evals": _summary(score(eval_lines)),
            },
            "missed": overall["missed"],
            "flagged_in_sources": overall["flagged_in_sources"],
            "spurious": overall["spurious"],
            "unexplained": score(eval_lines)["spurious"],
            "norms": dict(Counter(str(f[0]) for *_, found in lines for f in found)),
            "passes": max(1, args.passes),
        }
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(result, ensure_ascii=False)
    RESULTS.write_text(line + "\n", encoding="utf-8")
    print(line)


def _summary(scored: dict[str, Any]) -> dict[str, Any]:
    return {k: scored[k] for k in ("recall", "false_flags", "missed_flags", "citations", "found")}


if __name__ == "__main__":
    main()
