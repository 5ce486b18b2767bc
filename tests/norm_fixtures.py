"""The fictional test law as the files a team would hold: its .txt, a Gaceta-style PDF of it, a scanned-looking PDF.

The PDF is generated (fpdf2) rather than committed so the print artefacts it carries are visible here: a running
header and footer on every page, page numbers, and words hyphenated across lines, which the importer must undo.
"""

from __future__ import annotations

import json
from pathlib import Path

from fpdf import FPDF

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "norms"
LEY_TXT = FIXTURES / "ley_de_prueba.txt"
LEY_EVAL = FIXTURES / "ley_de_prueba_eval.jsonl"
LEY_NAME = "Ley de prueba 7 de 2099"
RUNNING_HEADER = "Gaceta Oficial de Prueba, martes 30 de noviembre de 2099 - No. 99999-A"
RUNNING_FOOTER = "Documento de prueba para Lexvoz, sin valor legal"
WRAP = 88
LINES_PER_PAGE = 40


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    """One JSON object per line, as a team's .jsonl norm or glosses file is written."""
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def norm_jsonl(path: Path, norm: str, texts: list[str], **meta: str) -> Path:
    """A team's .jsonl norm of `texts` as articles 1, 2, ..., each line with `meta` (date, gaceta...)."""
    return write_jsonl(path, [{"norm": norm, "article": str(i), "text": t, **meta} for i, t in enumerate(texts, 1)])


def wrap_with_hyphens(paragraph: str, width: int = WRAP) -> list[str]:
    """Wrap like a typesetter: a long word that does not fit is split with a hyphen."""
    lines: list[str] = []
    current = ""
    for word in paragraph.split():
        candidate = f"{current} {word}".strip()
        if len(candidate) <= width:
            current = candidate
            continue
        room = width - len(current) - 2
        if word.isalpha() and len(word) >= 8 and room >= 4 and len(word) - room >= 3:
            lines.append(f"{current} {word[:room]}-".strip())
            current = word[room:]
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


class _GacetaPdf(FPDF):
    def header(self) -> None:
        self.set_font("Helvetica", size=8)
        self.cell(0, 5, RUNNING_HEADER, new_x="LMARGIN", new_y="NEXT")
        self.ln(2)

    def footer(self) -> None:
        self.set_y(-15)
        self.set_font("Helvetica", size=8)
        self.cell(0, 5, RUNNING_FOOTER, new_x="LMARGIN", new_y="NEXT")
        self.cell(0, 5, str(self.page_no()), align="C")


def ley_pdf_bytes(text: str | None = None) -> bytes:
    """The test law as a multi-page PDF with running header, footer, page numbers and hyphenation."""
    source = text if text is not None else LEY_TXT.read_text(encoding="utf-8")
    pdf = _GacetaPdf(format="A4")
    pdf.set_auto_page_break(False)
    pdf.add_page()
    pdf.set_font("Helvetica", size=10)
    written = 0
    for paragraph in source.splitlines():
        for line in wrap_with_hyphens(paragraph) if paragraph.strip() else [""]:
            if written >= LINES_PER_PAGE:
                pdf.add_page()
                pdf.set_font("Helvetica", size=10)
                written = 0
            pdf.cell(0, 5.5, line, new_x="LMARGIN", new_y="NEXT")
            written += 1
    return bytes(pdf.output())


def scanned_pdf_bytes() -> bytes:
    """Two pages that are only a picture, as a scanner produces: no text layer at all."""
    from PIL import Image, ImageDraw

    image = Image.new("L", (600, 800), 255)
    draw = ImageDraw.Draw(image)
    for y in range(60, 760, 24):
        draw.line((50, y, 550, y), fill=40, width=6)  # lines of "text" as pixels
    pdf = FPDF(format="A4")
    for _ in range(2):
        pdf.add_page()
        pdf.image(image, x=10, y=10, w=190)
    return bytes(pdf.output())
