"""What each hand rule, word list and tuned constant of the search is worth: turn it off, measure again.

For one index and some labelled eval files, every variant below is the shipped search with one thing turned off
or set to its neutral value; each is scored by `panama_law.evaluate.evaluate` (the machinery of
`python -m panama_law eval`, so the figures are the product's): recall@3, MRR@10, answerable questions refused and
out-of-scope questions answered. Nothing is edited on disk: a variant is a `SearchConfig` field, an index with some
glosses left out, or a word table swapped for an empty one for the time it is measured (the search reads its
tables from module attributes, which `_patched` sets and restores). The searcher is built once per variant, since
some tables (stopwords, sound-alike folding) also shape the index's term statistics.

Run from the repository root, on development files only (never held-out ones):

    python research/search/ablate.py --data-dir D FILE.jsonl [FILE.jsonl ...] --out ablation.json
    python -m research.search.ablate --data-dir D FILE.jsonl ... --only baseline,no_stopwords
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `python research/search/ablate.py` from the repository root
    sys.path.insert(0, str(ROOT))

from panama_law import text  # noqa: E402
from panama_law.evaluate import evaluate, load_items  # noqa: E402
from panama_law.index import disk as index_mod  # noqa: E402
from panama_law.index.disk import LoadedIndex  # noqa: E402
from panama_law.retrieve import gazetteer, query, scope, search  # noqa: E402
from panama_law.retrieve.lexicon import Lexicon  # noqa: E402
from panama_law.retrieve.search import SearchConfig, Searcher  # noqa: E402


@contextlib.contextmanager
def _patched(*changes: tuple[object, str, object]) -> Iterator[None]:
    """Set module attributes for the time of one variant, then put them back; clears the stem cache around it,
    since `text.stem` memoises what the sound-alike folding made of each word."""
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in changes]
    text.stem.cache_clear()
    try:
        for obj, name, value in changes:
            setattr(obj, name, value)
        yield
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)
        text.stem.cache_clear()


@dataclass(frozen=True)
class Variant:
    name: str
    what: str
    config: Callable[[SearchConfig], SearchConfig] = lambda c: c
    loaded: Callable[[LoadedIndex], LoadedIndex] = lambda x: x
    patches: Callable[[], tuple[tuple[object, str, object], ...]] = lambda: ()
    kind: str = field(default="rule")


def _without_glosses(norm: str | None) -> Callable[[LoadedIndex], LoadedIndex]:
    """The index without the glosses of `norm` (None: of every norm); the norm then gets unglossed fusion weights,
    as it would if shipped without them."""

    def strip(loaded: LoadedIndex) -> LoadedIndex:
        keep = [i for i, g in enumerate(loaded.glosses) if norm is not None and loaded.articles[g.article].norm != norm]
        return replace(
            loaded,
            glosses=[loaded.glosses[i] for i in keep],
            gloss_vectors=loaded.gloss_vectors[np.asarray(keep, dtype=np.intp)],
        )

    return strip


def _no_sound_folding() -> tuple[tuple[object, str, object], ...]:
    # Keep ñ → n: it is spelling normalisation the scope rule's unit stems rely on, not a sound-alike merge.
    return ((text, "_SOUNDS", tuple(p for p in text._SOUNDS if p[0].pattern == "ñ")),)


def variants(loaded: LoadedIndex) -> list[Variant]:
    empty = Lexicon({})
    no_names = scope._Names(frozenset())
    out = [
        Variant("baseline", "the shipped search", kind="baseline"),
        Variant("no_abstain_foreign", "rule: another country's law", lambda c: replace(c, abstain_foreign=False)),
        Variant(
            "no_evidence_threshold",
            "constant: abstain_below (never abstain on evidence)",
            lambda c: replace(c, abstain_below=-math.inf),
            kind="constant",
        ),
        Variant(
            "no_rules_no_threshold",
            "both abstain mechanisms off",
            lambda c: replace(c, abstain_below=-math.inf, abstain_foreign=False),
        ),
        Variant(
            "no_constitution_lexicon",
            "table: the Constitution's lexicon (data/constitution_lexicon.txt)",
            patches=lambda: ((query, "CONSTITUTION", empty), (search, "CONSTITUTION", empty)),
            kind="table",
        ),
        Variant(
            "no_everyday_lexicon",
            "table: data/everyday_lexicon.txt",
            patches=lambda: ((query, "EVERYDAY", empty),),
            kind="table",
        ),
        Variant(
            "no_gazetteer",
            "table: every gazetteer list (places, demonyms, institutions)",
            patches=lambda: (
                (scope, "_PLACES", no_names),
                (scope, "_FOREIGN_INSTITUTIONS", no_names),
                (scope, "DEMONYMS", frozenset()),
            ),
            kind="table",
        ),
        Variant(
            "no_gazetteer_cities",
            "table: data/foreign_cities.txt (countries, capitals, states kept)",
            patches=lambda: ((scope, "_PLACES", scope._Names(gazetteer.PLACES - _city_names())),),
            kind="table",
        ),
        Variant(
            "no_gazetteer_institutions",
            "table: data/foreign_institutions.txt",
            patches=lambda: ((scope, "_FOREIGN_INSTITUTIONS", no_names),),
            kind="table",
        ),
        Variant(
            "no_gazetteer_demonyms",
            "table: gazetteer demonyms",
            patches=lambda: ((scope, "DEMONYMS", frozenset()),),
            kind="table",
        ),
        Variant(
            "no_stopwords",
            "table: text.STOPWORDS (function words and filler)",
            patches=lambda: ((text, "STOPWORDS", frozenset()),),
            kind="table",
        ),
        Variant("no_sound_folding", "rule: sound-alike folding (b/v, s/z/c, ll/y, h)", patches=_no_sound_folding),
        Variant(
            "heading_weight_0",
            "constant: heading_weight 2 -> 0",
            lambda c: replace(c, heading_weight=0),
            kind="constant",
        ),
        Variant(
            "expansion_weight_0",
            "constant: expansion_weight 0.8 -> 0 (lexicon terms weigh nothing)",
            lambda c: replace(c, expansion_weight=0.0),
            kind="constant",
        ),
        Variant(
            "gloss_dense_offset_0",
            "constant: gloss_dense_offset 0.2 -> 0",
            lambda c: replace(c, gloss_dense_offset=0.0),
            kind="constant",
        ),
    ]
    glossed = sorted({loaded.articles[g.article].norm for g in loaded.glosses})
    for norm in glossed:
        out.append(
            Variant(f"no_glosses[{norm[:24]}]", f"glosses of {norm}", loaded=_without_glosses(norm), kind="gloss")
        )
    if len(glossed) > 1:
        out.append(Variant("no_glosses", "every norm's glosses", loaded=_without_glosses(None), kind="gloss"))
    return out


def _city_names() -> frozenset[str]:
    return gazetteer._names("foreign_cities.txt")


def _metrics(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "recall_at_3": report["recall_at_3"],
        "mrr_at_10": report["mrr_at_10"],
        "in_scope": report["in_scope"],
        "answerable_refused": report["in_scope_abstained"],
        "out_of_scope": report["out_of_scope"],
        "out_of_scope_answered": report["out_of_scope"] - report["out_of_scope_abstained"],
    }


def run(data_dir: Path, files: list[Path], only: set[str] | None = None) -> dict[str, Any]:
    loaded = index_mod.load(data_dir)
    items = {path.name: load_items(path) for path in files}
    rows = []
    for variant in variants(loaded):
        if only and variant.name not in only:
            continue
        started = time.perf_counter()
        with _patched(*variant.patches()):
            searcher = Searcher(variant.loaded(loaded), variant.config(SearchConfig()))
            per_file = {name: _metrics(evaluate(searcher, its)) for name, its in items.items()}
        rows.append(
            {
                "variant": variant.name,
                "kind": variant.kind,
                "what": variant.what,
                "files": per_file,
                "seconds": round(time.perf_counter() - started, 1),
            }
        )
        print(f"  {variant.name}: {rows[-1]['seconds']} s", file=sys.stderr)
    return {"data_dir_norms": [n.name for n in loaded.norms], "files": list(items), "variants": rows}


def table(result: dict[str, Any]) -> str:
    """One line per variant and file: the figures and, after the baseline, their change."""
    base = {f: m for row in result["variants"] if row["variant"] == "baseline" for f, m in row["files"].items()}
    lines = [f"{'variant':32} {'file':28} {'R@3':>12} {'MRR@10':>14} {'refused':>9} {'oos answ.':>10}"]
    for row in result["variants"]:
        shift = row["variant"] != "baseline"
        for name, m in row["files"].items():
            b = base.get(name) if shift else None

            def cell(key: str, fmt: str, width: int, m: dict[str, Any] = m, b: dict[str, Any] | None = b) -> str:
                value = m[key]
                if value is None:
                    return f"{'-':>{width}}"
                shown = format(value, fmt)
                if b is not None and b[key] is not None:
                    shown += f" ({value - b[key]:+{fmt}})"
                return f"{shown:>{width}}"

            refused = f"{m['answerable_refused']}/{m['in_scope']}"
            answered = f"{m['out_of_scope_answered']}/{m['out_of_scope']}"
            if b is not None:
                refused += f"({m['answerable_refused'] - b['answerable_refused']:+d})"
                answered += f"({m['out_of_scope_answered'] - b['out_of_scope_answered']:+d})"
            lines.append(
                f"{row['variant']:32} {name[:28]:28} {cell('recall_at_3', '.3f', 12)} {cell('mrr_at_10', '.3f', 14)}"
                f" {refused:>9} {answered:>10}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path, help="labelled development JSONL files (never held-out)")
    parser.add_argument("--data-dir", type=Path, required=True, help="index directory")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--only", help="comma-separated variant names (default: all)")
    args = parser.parse_args(argv)
    if any(p.name.startswith("heldout") for p in args.files):
        parser.error("held-out files are for `python -m panama_law eval` alone, after the constants are fixed")
    only = set(args.only.split(",")) if args.only else None
    result = run(args.data_dir, args.files, only)
    print(table(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
