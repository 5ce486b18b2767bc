"""Redaction throughput: how many characters a second `redact()` gets through, on ordinary questions and on
inputs built to make a careless pattern rescan the text (the spelled-out e-mail chain took 9 s on 20 KB).

Prints the figures and writes them to bench/results/redact.json. Each figure is the best of several runs
(a busy machine only ever slows a run down). `growth_10x` is the time for 10x the input divided by the time
for the input: about 10 for linear work, about 100 for quadratic.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.ops.redact import redact  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "redact.json"

INPUTS: dict[str, Callable[[int], str]] = {
    "question with identifiers": lambda n: (
        (
            "Mi cédula es 8-123-4567 y mi celular 6123-4567; escríbame a juan.perez@example.com. "
            "¿Qué dice el artículo 72 de la Constitución sobre la maternidad? "
        )
        * (n // 150 + 1)
    ),
    "legal text, no identifiers": lambda n: (
        (
            "Artículo 19. No habrá fueros o privilegios ni discriminación por razón de raza, nacimiento, "
            "discapacidad, clase social, sexo, religión o ideas políticas (Ley 4 de 1999, 12-05-2004). "
        )
        * (n // 170 + 1)
    ),
    "spoken e-mail chain": lambda n: "juan punto " * (n // 11 + 1),
    "dotted run": lambda n: "a." * (n // 2 + 1),
    "percent run": lambda n: "%" * n,
    "dotted digit run": lambda n: "8.123." * (n // 6 + 1),
    "digit pairs": lambda n: "61 23 " * (n // 6 + 1),
    "full-width digits": lambda n: "６１２３ ４５ " * (n // 8 + 1),
}


def _best_seconds(text: str, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        redact(text)
        best = min(best, time.perf_counter() - started)
    return best


def measure(size: int, runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, make in INPUTS.items():
        small, big = make(size)[:size], make(size * 10)[: size * 10]
        t_small, t_big = _best_seconds(small, runs), _best_seconds(big, max(1, runs // 2))
        out[name] = {
            "chars": size,
            "ms": round(t_small * 1000, 3),
            "chars_per_s": round(size / t_small),
            "ms_10x": round(t_big * 1000, 3),
            "growth_10x": round(t_big / t_small, 1),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chars", type=int, default=2_000, help="input size (default 2000, the tool's limit)")
    parser.add_argument("--runs", type=int, default=9, help="runs per figure; the best counts")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.chars < 100 or args.runs < 1:
        parser.error("--chars must be at least 100 and --runs at least 1")
    figures = measure(args.chars, args.runs)
    result = {
        "inputs": figures,
        "max_growth_10x": max(f["growth_10x"] for f in figures.values()),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for name, f in figures.items():
        print(
            f"{name:28s} {f['chars']:>6} chars in {f['ms']:>8.3f} ms ({f['chars_per_s']:>10,} chars/s); "
            f"10x input: {f['ms_10x']:>9.3f} ms (x{f['growth_10x']})"
        )
    try:
        shown = args.output.relative_to(ROOT)
    except ValueError:
        shown = args.output
    print(f"written to {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
