"""From a file a team holds to norms ready to index: the Constitution JSON, a law as .txt or .pdf, or a .jsonl.

Everything is parsed and checked here, before the index is touched, so a bad file costs nothing but its one-line
error. Metadata comes from, in order: the command-line flags, a sidecar `NAME.meta.json` beside the file
({"norm", "date", "gaceta", "url"}), the .jsonl lines themselves; a .txt/.pdf with no name anywhere is named
after its file ("ley_6_de_2002.txt" → "Ley 6 de 2002").

The .jsonl format, one article per line (`headings`, `date`, `gaceta`, `url` and `glosses` optional; the norm's
metadata may sit on any of its lines but must not disagree):

    {"norm": "Ley 6 de 2002", "article": "12-A", "text": "...", "headings": ["Título I", "Capítulo 2"],
     "date": "2002-01-22", "gaceta": "24476", "url": "https://www.gacetaoficial.gob.pa/...",
     "glosses": ["me botaron sin decirme por que", "..."]}

`glosses` are callers' wordings of what the article settles, searched but never shown (`panama_law.ingest.glosses`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..norms import (
    Article,
    NormError,
    NormInfo,
    check_articles,
    check_date,
    check_gaceta,
    check_name,
    check_url,
    name_key,
    parse_label,
)
from ..settings import SOURCE_SHA256
from . import corpus, glosses

SUFFIXES = (".json", ".txt", ".pdf", ".jsonl")
SIDECAR = ".meta.json"
GLOSSES_SIDECAR = ".glosses.jsonl"
MAX_FILE_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """What the operator said about the file; None means "not given"."""

    norm: str | None = None
    date: str | None = None
    gaceta: str | None = None
    url: str | None = None
    expected_sha256: str | None = SOURCE_SHA256  # only for the Constitution JSON
    glosses: Path | None = None  # a glosses file (`glosses.read`); else a NAME.glosses.jsonl beside the file


@dataclass(frozen=True, slots=True)
class ParsedNorm:
    """A norm ready to index; `glosses` maps an article's position in `articles` to its callers' glosses."""

    info: NormInfo
    articles: list[Article]
    glosses: dict[int, tuple[str, ...]] = field(default_factory=dict)


def is_norm_file(path: Path) -> bool:
    return (
        path.is_file()
        and not path.name.startswith(".")
        and not path.name.endswith(SIDECAR)
        and not path.name.endswith(GLOSSES_SIDECAR)
    )


def _with_glosses(path: Path, norms: list[ParsedNorm], opts: ImportOptions) -> list[ParsedNorm]:
    """Attach the glosses file given (or found beside `path`) to the one norm read from it."""
    source = opts.glosses
    if source is None:
        beside = _beside(path, GLOSSES_SIDECAR)
        source = beside if beside.is_file() else None
    if source is None:
        return norms
    if len(norms) != 1:
        raise NormError(f"{path.name} holds {len(norms)} norms; give their glosses on the .jsonl lines instead")
    (parsed,) = norms
    if parsed.glosses and parsed.info.kind != "constitution":
        raise NormError(f"{path.name} carries glosses on its lines and {source.name} gives more; use one of the two")
    return [replace(parsed, glosses=glosses.attach(parsed.articles, glosses.read(source), source.name))]


def _read(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise NormError(f"{path.name} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB")
        return path.read_bytes()
    except OSError as exc:
        raise corpus.CorpusError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _beside(path: Path, suffix: str) -> Path:
    """The sidecar `NAME<suffix>` beside `NAME.ext`."""
    return path.with_name(path.name.rsplit(".", 1)[0] + suffix)


def _sidecar(path: Path) -> dict[str, str]:
    meta_path = _beside(path, SIDECAR)
    if not meta_path.is_file():
        return {}
    try:
        raw = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NormError(f"{meta_path.name} is not a readable JSON object ({exc})") from exc
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise NormError(f"{meta_path.name} must be a JSON object of strings (norm, date, gaceta, url)")
    return {k: v for k, v in raw.items() if k in ("norm", "date", "gaceta", "url")}


def _name_from_file(path: Path) -> str:
    stem = path.name.rsplit(".", 1)[0].replace("_", " ").replace("-", " ")
    return stem[:1].upper() + stem[1:]


def _info(name: str, kind: str, data_sha: str, opts: ImportOptions, sidecar: dict[str, str]) -> NormInfo:
    return NormInfo(
        name=check_name(name),
        kind=kind,
        date=check_date(opts.date or sidecar.get("date")),
        gaceta=check_gaceta(opts.gaceta or sidecar.get("gaceta")),
        url=check_url(opts.url or sidecar.get("url")),
        source_sha256=data_sha,
    )


def _decode(data: bytes, path: Path) -> str:
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise NormError(f"{path.name} is neither UTF-8 nor Windows-1252 text")


def read_norms(path: Path, opts: ImportOptions | None = None, *, with_glosses: bool = True) -> list[ParsedNorm]:
    """Parse `path` into one or more norms (a .jsonl may hold several), with their glosses (but for
    `with_glosses=False`, none from a glosses file: the norm a worksheet is about to be written for); NormError /
    CorpusError when refused."""
    opts = opts or ImportOptions()
    norms = _read_norms(path, opts)
    return _with_glosses(path, norms, opts) if with_glosses else norms


def _read_norms(path: Path, opts: ImportOptions) -> list[ParsedNorm]:
    from .splitter import split_articles

    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise NormError(f"{path.name}: unsupported file type (use {', '.join(SUFFIXES)})")
    data = _read(path)
    sha = corpus.sha256_hex(data)
    sidecar = _sidecar(path)
    if suffix == ".json":
        named = opts.norm or sidecar.get("norm")
        if named and name_key(named) != name_key(corpus.DOCUMENT_NAME):
            raise NormError(f"a .json file is read as the Constitution, named {corpus.DOCUMENT_NAME!r}; not {named!r}")
        corpus.verify_checksum(data, opts.expected_sha256)
        info = _info(corpus.DOCUMENT_NAME, "constitution", sha, opts, sidecar)
        articles = corpus.parse(data)
        return [ParsedNorm(info, articles, glosses.constitution(articles))]
    if suffix == ".jsonl":
        return _read_jsonl(data, path, opts, sha)
    name = check_name(opts.norm or sidecar.get("norm") or _name_from_file(path))
    if suffix == ".pdf":
        from .pdftext import pdf_lines

        lines = pdf_lines(data)
    else:
        lines = _decode(data, path).splitlines()
    info = _info(name, suffix.lstrip("."), sha, opts, sidecar)
    return [ParsedNorm(info, split_articles(name, lines))]


def _jsonl_record(line: str, where: str, opts: ImportOptions) -> tuple[str, Article, dict[str, Any]]:
    """One `.jsonl` line as (norm name, article, the raw object for its metadata); one clear error if malformed."""
    try:
        raw: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise NormError(f"{where}: not JSON ({exc.msg})") from exc
    if not isinstance(raw, dict):
        raise NormError(f"{where}: each line must be a JSON object")
    norm = raw.get("norm", opts.norm)
    if opts.norm and norm != opts.norm:
        raise NormError(f"{where}: norm {norm!r} differs from --norm {opts.norm!r}")
    text, label, headings = raw.get("text"), raw.get("article"), raw.get("headings", [])
    if not isinstance(norm, str) or not isinstance(text, str) or not isinstance(label, (str, int)):
        raise NormError(f"{where}: needs 'norm' (string), 'article' (string or number) and 'text' (string)")
    if not isinstance(headings, list) or not all(isinstance(h, str) for h in headings):
        raise NormError(f"{where}: 'headings' must be a list of strings")
    try:
        name = check_name(norm)
        number, suffix = parse_label(str(label))
    except NormError as exc:
        raise NormError(f"{where}: {exc}") from exc
    clean = tuple(" ".join(h.split()) for h in headings if h.strip())
    return name, Article(norm=name, number=number, suffix=suffix, headings=clean, text=" ".join(text.split())), raw


def _merge_meta(meta: dict[str, str], raw: dict[str, Any], where: str, name: str) -> None:
    """A norm's metadata may sit on any of its lines, but two lines must not disagree."""
    for key in ("date", "gaceta", "url"):
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or meta.setdefault(key, value) != value:
            raise NormError(f"{where}: {key} {value!r} disagrees with an earlier line of {name!r}")


def _read_jsonl(data: bytes, path: Path, opts: ImportOptions, sha: str) -> list[ParsedNorm]:
    order: list[str] = []
    articles: dict[str, list[Article]] = {}
    meta: dict[str, dict[str, str]] = {}
    glossed: dict[str, dict[int, tuple[str, ...]]] = {}
    for line_no, line in enumerate(_decode(data, path).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{line_no}"
        name, article, raw = _jsonl_record(line, where, opts)
        if name not in articles:
            clash = next((n for n in order if name_key(n) == name_key(name)), None)
            if clash:
                raise NormError(f"{where}: norm name {name!r} collides with {clash!r} in the same file")
            order.append(name)
            articles[name], meta[name], glossed[name] = [], {}, {}
        _merge_meta(meta[name], raw, where, name)
        if raw.get("glosses") is not None:
            glossed[name][len(articles[name])] = glosses.check(raw["glosses"], where)
        articles[name].append(article)
    if not order:
        raise NormError(f"no articles found in {path.name}")
    out: list[ParsedNorm] = []
    for name in order:
        info = replace(_info(name, "jsonl", sha, opts, meta[name]), name=name)
        out.append(ParsedNorm(info, check_articles(name, articles[name]), glossed[name]))
    return out
