"""Retrieval evaluation over a JSONL file of {id, question, gold: [...], ...}.

`gold` lists citations ("Ley 6 de 2002, artículo 3", matched ignoring case and accents) or, as the first eval
files did, bare numbers, which name articles of the Constitution.

Items with an empty `gold` are out of scope: the right answer is no source at all. In-scope metrics are computed
on what the server would actually return (after abstaining), so a too-eager abstain threshold shows up as lost
recall rather than hiding. Both abstention errors are reported: in-scope questions answered with no source (the
costly one) and out-of-scope questions that still got sources.

With `details`, every in-scope miss (gold not in the top 3) lists the articles ranked above the gold one and, for
each, the ranking that contributed most to its fused score: which signal decided it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .ingest.corpus import DOCUMENT_NAME
from .norms import citation_key
from .retrieve.search import RANKINGS, Searcher, Signals

Gold = int | str


@dataclass(frozen=True, slots=True)
class EvalItem:
    id: str
    question: str
    gold: frozenset[Gold]
    kind: str | None = None

    @property
    def gold_keys(self) -> frozenset[str]:
        return frozenset(gold_key(g) for g in self.gold)


def gold_key(gold: Gold) -> str:
    """A gold entry as a citation key: a number is a Constitution article."""
    return citation_key(f"{DOCUMENT_NAME}, artículo {gold}" if isinstance(gold, int) else gold)


def _gold(raw: object) -> Gold:
    if isinstance(raw, bool) or not isinstance(raw, (int, str)) or (isinstance(raw, str) and not raw.strip()):
        raise ValueError("gold entries are citations (strings) or Constitution article numbers")
    return raw


def label(searcher: Searcher, pos: int) -> Gold:
    """How a report names an article: its number for the Constitution (as the gold files do), else its citation."""
    article = searcher.articles[pos]
    return article.number if article.norm == DOCUMENT_NAME and not article.suffix else article.citation


def load_items(path: Path) -> list[EvalItem]:
    """Read and check an eval file; a malformed line is a ValueError naming the file and line."""
    items: list[EvalItem] = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{line_no}: not JSON ({exc.msg})") from exc
        if (
            not isinstance(raw, dict)
            or not isinstance(raw.get("question"), str)
            or not isinstance(raw.get("gold"), list)
        ):
            raise ValueError(f"{path}:{line_no}: needs 'question' (string) and 'gold' (list)")
        try:
            gold = frozenset(_gold(g) for g in raw["gold"])
        except ValueError as exc:
            raise ValueError(f"{path}:{line_no}: {exc}") from exc
        items.append(
            EvalItem(id=str(raw.get("id", line_no)), question=raw["question"], gold=gold, kind=raw.get("kind"))
        )
    return items


def _contributions(searcher: Searcher, sig: Signals, pos: int) -> dict[str, float]:
    """Each ranking's share of an article's fused score (weight / (k + rank))."""
    out: dict[str, float] = {}
    for name in RANKINGS:
        rank = sig.rank_in(name, pos)
        weight = searcher.weight(name, pos)
        if rank is not None and weight > 0:
            out[name] = weight / (searcher.config.rrf_k + rank)
    return out


def explain_miss(searcher: Searcher, sig: Signals, gold: frozenset[Gold]) -> dict[str, Any]:
    """What ranked above the best-placed gold article, and which ranking put each of them there."""
    keys = {gold_key(g) for g in gold}
    gold_rank = next((r for r, p in enumerate(sig.ranked, 1) if searcher.articles[p].key in keys), None)
    above_positions = sig.ranked[: (gold_rank - 1) if gold_rank else 3]
    above = []
    for pos in above_positions:
        parts = _contributions(searcher, sig, pos)
        above.append(
            {
                "article": label(searcher, pos),
                "decided_by": max(parts, key=lambda k: parts[k]) if parts else None,
                "ranks": {name: sig.rank_in(name, pos) for name in RANKINGS},
            }
        )
    positions = {str(g): searcher.position(gold_key(g)) for g in sorted(gold, key=str)}
    gold_ranks = {
        g: {name: sig.rank_in(name, pos) for name in RANKINGS} for g, pos in positions.items() if pos is not None
    }
    return {"gold_rank": gold_rank, "ranked_above": above, "gold_ranks": gold_ranks}


def evaluate(searcher: Searcher, items: list[EvalItem], *, details: bool = False) -> dict[str, Any]:
    in_scope = [i for i in items if i.gold]
    out_scope = [i for i in items if not i.gold]
    hits3 = 0
    rr_sum = 0.0
    abstained_in_scope = 0
    rows: list[dict[str, Any]] = []
    for item in in_scope:
        sig, *_ = searcher.signals(item.question)
        abstain = searcher.abstains(sig) or not sig.ranked
        ranked = [] if abstain else [searcher.articles[p].key for p in sig.ranked[:10]]
        abstained_in_scope += int(abstain)
        keys = item.gold_keys
        hit = any(k in keys for k in ranked[:3])
        hits3 += int(hit)
        rank = next((r for r, k in enumerate(ranked, 1) if k in keys), None)
        rr_sum += 1.0 / rank if rank else 0.0
        if details and not hit:
            rows.append(
                {
                    "id": item.id,
                    "kind": item.kind,
                    "gold": sorted(item.gold, key=str),
                    "abstained": abstain,
                    "evidence": round(sig.evidence(searcher.config), 3),
                    **explain_miss(searcher, sig, item.gold),
                }
            )
    abstained_out = 0
    answered_out: list[dict[str, Any]] = []
    for item in out_scope:
        sig, *_ = searcher.signals(item.question)
        abstain = searcher.abstains(sig) or not sig.ranked
        abstained_out += int(abstain)
        if details and not abstain:
            answered_out.append(
                {
                    "id": item.id,
                    "kind": item.kind,
                    "top": [label(searcher, p) for p in sig.ranked[:3]],
                    "evidence": round(sig.evidence(searcher.config), 3),
                }
            )
    report: dict[str, Any] = {
        "recall_at_3": round(hits3 / len(in_scope), 4) if in_scope else None,
        "mrr_at_10": round(rr_sum / len(in_scope), 4) if in_scope else None,
        "abstain_rate_out_of_scope": round(abstained_out / len(out_scope), 4) if out_scope else None,
        "in_scope_no_source_rate": round(abstained_in_scope / len(in_scope), 4) if in_scope else None,
        "in_scope": len(in_scope),
        "in_scope_hits_at_3": hits3,
        "in_scope_abstained": abstained_in_scope,
        "out_of_scope": len(out_scope),
        "out_of_scope_abstained": abstained_out,
    }
    if details:
        report["misses"] = rows
        report["out_of_scope_answered"] = answered_out
    return report
