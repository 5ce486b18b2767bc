"""Did a change move any search result? Dump every development question's rankings, then compare two dumps.

A speed change to the searcher must leave its answers alone. `dump` writes, for each question of the development
sets (never a held-out one), the fused top 10, each of the four rankings' top `depth`, the abstain decision and the
returned sources (citation, fused score, excerpt); `compare` lists every question whose dump differs and the
largest change in the abstain model's inputs. Run `dump` before and after on the same index:

    python bench/rankings.py dump before.json --data-dir DIR      (on the old commit)
    python bench/rankings.py dump after.json --data-dir DIR       (on the new one)
    python bench/rankings.py compare before.json after.json       (exit 1 if any ranking moved)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/rankings.py` from the repository root
    sys.path.insert(0, str(ROOT))

DEV_SETS = (
    ROOT / "../shared/eval/retrieval_visible.jsonl",
    ROOT / "bench" / "eval" / "dev_extra.jsonl",
    ROOT / "bench" / "eval" / "calibration.jsonl",
)
COMPARED = ("top10", "rankings", "abstains", "sources")
SIGNALS = ("evidence", "dense_max", "lex_max")


def dump(data_dir: Path, files: list[Path]) -> list[dict[str, Any]]:
    from panama_law.index import disk as index
    from panama_law.retrieve.search import Searcher

    searcher = Searcher(index.load(data_dir))
    rows = []
    for path in files:
        for line in path.read_text("utf-8").splitlines():
            if not line.strip():
                continue
            question = json.loads(line)["question"]
            sig, *_ = searcher.signals(question)
            rows.append(
                {
                    "question": question,
                    "top10": sig.ranked[:10],
                    "rankings": sig.rankings,
                    "abstains": searcher.abstains(sig),
                    "sources": [[h.article.citation, h.score, h.excerpt] for h in searcher.search(question)],
                    "evidence": sig.evidence(searcher.config),
                    "dense_max": sig.dense_max,
                    "lex_max": sig.lex_max,
                }
            )
    return rows


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> tuple[list[str], float]:
    """The questions whose rankings, decision or sources differ, and the largest change of a signal."""
    if [r["question"] for r in before] != [r["question"] for r in after]:
        raise ValueError("the two dumps are of different question lists")
    moved = [b["question"] for b, a in zip(before, after, strict=True) if any(b[k] != a[k] for k in COMPARED)]
    drift = max((abs(b[k] - a[k]) for b, a in zip(before, after, strict=True) for k in SIGNALS), default=0.0)
    return moved, drift


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("--data-dir", type=Path, required=True)
    d.add_argument("--file", type=Path, action="append", help="question files (default: the development sets)")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "dump":
        rows = dump(args.data_dir, args.file or list(DEV_SETS))
        args.out.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
        print(f"{len(rows)} questions dumped to {args.out}")
        return 0
    moved, drift = compare(json.loads(args.before.read_text("utf-8")), json.loads(args.after.read_text("utf-8")))
    for question in moved:
        print(f"moved: {question}")
    print(f"{len(moved)} questions moved; largest change of an abstain input: {drift:.3g}")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
