"""Write the Constitution as a plain law text, as a team would import it: Gaceta-style lines with its Título and
Capítulo headings and "Artículo N." openings, no glosses.

    python -m research.search.plain_constitution SOURCE.json OUT.txt

The output is an experiment input (never committed): imported alone with `python -m panama_law import OUT.txt
--norm NAME --data-dir D`, it makes an index whose only norm has no callers' glosses, so the engine's behaviour
on an unglossed norm can be measured on the Constitution's many development questions.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

_KEY = re.compile(r"^articulo-(\d+)(?:-?([A-Za-z]+))?$")


def _heading(label: str) -> list[str]:
    """'TÍTULO III - DERECHOS ...' or 'Capítulo 1°: Garantías' → the heading line and its name line."""
    m = re.match(r"^\s*(T[IÍ]TULO|Cap[ií]tulo)\s+([IVXLC]+|\d+)\s*[°º]?\s*[-:.]?\s*(.*)$", label)
    if not m:
        raise ValueError(f"unrecognised heading: {label!r}")
    word = "TÍTULO" if m.group(1).upper().startswith("T") else "Capítulo"
    return [f"{word} {m.group(2)}", m.group(3).strip()]


def _articles(node: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for key, value in node.items():
        if isinstance(value, str):
            m = _KEY.match(key)
            if not m:
                raise ValueError(f"unrecognised article key: {key!r}")
            label = m.group(1) + (f"-{m.group(2).upper()}" if m.group(2) else "")
            text = " ".join(value.split())
            lines += [f"Artículo {label}. {text}", ""]
        elif key.lower().startswith("cap") and all(not isinstance(v, str) for v in value.values()):
            lines += _articles(value)  # the "Capitulos" wrapper
        else:
            lines += [*_heading(key), "", *_articles(value)]
    return lines


def render(source: dict[str, Any]) -> str:
    head = [
        "CONSTITUCIÓN POLÍTICA DE LA REPÚBLICA DE PANAMÁ",
        "(Texto único, transcrito como texto plano para pruebas.)",
        "",
    ]
    return "\n".join(head + _articles(source)) + "\n"


def main(argv: list[str]) -> int:
    src, out = Path(argv[0]), Path(argv[1])
    Path(out).write_text(render(json.loads(src.read_text(encoding="utf-8"))), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
