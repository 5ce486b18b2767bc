"""Run `panama_law.evaluate` (what `python -m panama_law eval` runs) on every development set, per set and pooled.

python -m research.search.baseline DATA_DIR SETS_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from panama_law.evaluate import evaluate, load_items
from panama_law.index import disk as index
from panama_law.retrieve.search import Searcher


def main(argv: list[str]) -> int:
    searcher = Searcher(index.load(Path(argv[0])))
    pooled = []
    for path in sorted(Path(argv[1]).glob("*.jsonl")):
        items = load_items(path)
        pooled += items
        r = evaluate(searcher, items)
        print(
            f"{path.stem:24s} R@3 {r['recall_at_3']:.3f} MRR {r['mrr_at_10']:.3f} "
            f"refused {r['in_scope_abstained']}/{r['in_scope']} "
            f"oos-abstained {r['out_of_scope_abstained']}/{r['out_of_scope']}"
        )
    r = evaluate(searcher, pooled)
    print("POOLED", json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
