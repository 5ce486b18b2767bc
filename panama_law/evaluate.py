"""Retrieval evaluation over a JSONL file of {id, question, gold: [article numbers], ...}.

Items with an empty `gold` are out of scope: the right answer is no source at all. In-scope metrics are computed
on what the server would actually return (after abstaining), so a too-eager abstain threshold shows up as lost
recall rather than hiding.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .search import Searcher


@dataclass(frozen=True, slots=True)
class EvalItem:
    id: str
    question: str
    gold: frozenset[int]
    kind: str | None = None


def load_items(path: Path) -> list[EvalItem]:
    items: list[EvalItem] = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        raw = json.loads(line)
        if not isinstance(raw.get("question"), str) or not isinstance(raw.get("gold"), list):
            raise ValueError(f"{path}:{line_no}: needs 'question' (string) and 'gold' (list)")
        items.append(
            EvalItem(
                id=str(raw.get("id", line_no)),
                question=raw["question"],
                gold=frozenset(int(g) for g in raw["gold"]),
                kind=raw.get("kind"),
            )
        )
    return items


def evaluate(searcher: Searcher, items: list[EvalItem], *, details: bool = False) -> dict[str, Any]:
    in_scope = [i for i in items if i.gold]
    out_scope = [i for i in items if not i.gold]
    hits3 = 0
    rr_sum = 0.0
    abstained_in_scope = 0
    rows: list[dict[str, Any]] = []
    for item in in_scope:
        sig, *_ = searcher.signals(item.question)
        abstain = searcher.abstains(sig)
        ranked = [] if abstain else [searcher.articles[p].number for p in sig.ranked[:10]]
        abstained_in_scope += int(abstain)
        top3 = ranked[:3]
        hit = any(g in item.gold for g in top3)
        hits3 += int(hit)
        rank = next((r for r, n in enumerate(ranked, 1) if n in item.gold), None)
        rr_sum += 1.0 / rank if rank else 0.0
        if details:
            rows.append(
                {
                    "id": item.id,
                    "kind": item.kind,
                    "gold": sorted(item.gold),
                    "top": ranked[:5],
                    "rank": rank,
                    "dense_max": round(sig.dense_max, 3),
                    "lex_max": round(sig.lex_max, 2),
                    "evidence": round(sig.evidence(searcher.config.abstain_lex_coef), 3),
                }
            )
    abstained_out = 0
    for item in out_scope:
        sig, *_ = searcher.signals(item.question)
        abstain = searcher.abstains(sig) or not sig.ranked
        abstained_out += int(abstain)
        if details:
            rows.append(
                {
                    "id": item.id,
                    "kind": item.kind,
                    "gold": [],
                    "abstained": abstain,
                    "dense_max": round(sig.dense_max, 3),
                    "lex_max": round(sig.lex_max, 2),
                    "evidence": round(sig.evidence(searcher.config.abstain_lex_coef), 3),
                }
            )
    report: dict[str, Any] = {
        "recall_at_3": round(hits3 / len(in_scope), 4) if in_scope else None,
        "mrr_at_10": round(rr_sum / len(in_scope), 4) if in_scope else None,
        "abstain_rate_out_of_scope": round(abstained_out / len(out_scope), 4) if out_scope else None,
        "in_scope": len(in_scope),
        "in_scope_hits_at_3": hits3,
        "in_scope_abstained": abstained_in_scope,
        "out_of_scope": len(out_scope),
        "out_of_scope_abstained": abstained_out,
    }
    if details:
        report["items"] = rows
    return report
