"""What callers' glosses buy: the same articles asked the same questions with no glosses, with glosses a model
wrote by the product's own prompt (`panama_law.ingest.gloss_writer`), and, for the Constitution, with the hand
glosses it ships with.

    python -m research.search.glosses_worth --constitution PATH/constitucion_panama.json \\
        --model-glosses research/search/model_glosses/constitucion.jsonl bench/eval/fresh_dec.jsonl
    python -m research.search.glosses_worth --law bench/eval/norms/ley_de_prueba_10.txt \\
        --model-glosses research/search/model_glosses/ley_de_prueba_10.jsonl \\
        bench/eval/norms/ley_de_prueba_10_eval.jsonl

With `--constitution`, the Constitution is also imported as a team would import its own law (plain text through
`plain_constitution`, under another name, so none of its shipped glosses attach) and the eval files' article
numbers are asked of that law. Each index is built in a temporary folder and scored by
`panama_law.evaluate.evaluate`, the code behind `python -m panama_law eval`. Prints one JSON object per index and
file: recall@3, MRR@10, answerable questions refused, out-of-scope questions answered.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from panama_law.evaluate import EvalItem, evaluate, load_items
from panama_law.index import disk as index
from panama_law.index.build import import_norms
from panama_law.ingest.sources import ImportOptions
from panama_law.retrieve.search import Searcher
from research.search.plain_constitution import render

PLAIN_NAME = "Constitución de prueba"


def _as_plain_law(items: list[EvalItem]) -> list[EvalItem]:
    """The Constitution's article numbers as citations of the plain law that holds the same articles."""
    return [
        replace(item, gold=frozenset(f"{PLAIN_NAME}, artículo {g}" if isinstance(g, int) else g for g in item.gold))
        for item in items
    ]


def _score(data: Path, items: list[EvalItem]) -> dict[str, Any]:
    report = evaluate(Searcher(index.load(data)), items)
    keys = ("recall_at_3", "mrr_at_10", "in_scope", "in_scope_abstained", "out_of_scope", "out_of_scope_abstained")
    return {k: report[k] for k in keys}


def _index(folder: Path, name: str, source: Path, options: ImportOptions) -> Path:
    data = folder / name
    data.mkdir()
    import_norms(source, data, options)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--constitution", type=Path, help="the Constitution JSON (its pinned copy)")
    which.add_argument("--law", type=Path, help="a law as a team imports it (.txt/.pdf/.jsonl, sidecars beside it)")
    parser.add_argument("--model-glosses", type=Path, required=True, help="a glosses worksheet a model wrote")
    parser.add_argument("files", type=Path, nargs="+", help="labelled JSONL eval files")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs: list[tuple[str, Path, bool]] = []
        if args.constitution is not None:
            plain = folder / "constitucion.txt"
            plain.write_text(render(json.loads(args.constitution.read_text(encoding="utf-8"))), encoding="utf-8")
            runs.append(("hand glosses", _index(folder, "hand", args.constitution, ImportOptions()), False))
            source, options = plain, ImportOptions(norm=PLAIN_NAME, expected_sha256=None)
        else:
            source, options = args.law, ImportOptions(expected_sha256=None)
        runs.append(("no glosses", _index(folder, "none", source, options), True))
        model = replace(options, glosses=args.model_glosses)
        runs.append(("model glosses", _index(folder, "model", source, model), True))
        for path in args.files:
            items = load_items(path)
            for label, data, plain_law in runs:
                asked = _as_plain_law(items) if plain_law and args.constitution is not None else items
                print(json.dumps({"file": path.name, "index": label, **_score(data, asked)}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
