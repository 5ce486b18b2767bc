"""The documentation holds together: the README stays a first screen, every relative link and anchor in the
docs resolves, and no doc cites a generated (gitignored) file as if it were committed.

The files checked: README.md, CHANGELOG.md, docs/*.md, research/*.md and the question sets' cards
(bench/eval/*.md, bench/eval/norms/*.md). A link is `[text](target)` or `![alt](target)` outside fenced code;
`http(s)://` and `mailto:` targets are not followed. An anchor must name a heading of the target file, slugged as GitHub
slugs it (lower case, punctuation but `-` and `_` dropped, spaces to `-`, `-1`, `-2`... for repeats).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", re.S)
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# A sentence that cites a generated file must say it is generated: written/created/built/downloaded by
# something, logged, or not committed.
PRODUCED = re.compile(
    r"\b(writ(?:e|es|ten|ing)|creat(?:e|es|ed|ing)|buil(?:d|ds|t)|download(?:s|ed)?|generat(?:e|es|ed)|"
    r"not committed|logs? (?:are|is) in|logged|print(?:s|ed)?)\b",
    re.I,
)


def doc_files(root: Path = REPO_ROOT) -> list[Path]:
    """Every documentation file these checks cover, relative to `root`."""
    files = [root / "README.md", root / "CHANGELOG.md"]
    for folder, pattern in (
        ("docs", "*.md"),
        ("research", "*.md"),
        ("bench/eval", "*.md"),
        ("bench/eval/norms", "*.md"),
    ):
        files += sorted((root / folder).glob(pattern))
    return [f for f in files if f.is_file()]


def prose(text: str) -> str:
    """The text with fenced code blocks blanked out (line count kept), so examples are not read as links."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors by its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings, repeats numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose(path.read_text(encoding="utf-8")).split("\n"):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken_links(path: Path) -> list[str]:
    """Each relative link of `path` that names no existing file or no heading of its target, with why."""
    problems = []
    text = prose(path.read_text(encoding="utf-8"))
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        line = text.count("\n", 0, m.start()) + 1
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{path.name}:{line}: {target}: no such file")
            continue
        if anchor:
            if dest.is_dir() or dest.suffix.lower() != ".md":
                problems.append(f"{path.name}:{line}: {target}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(dest):
                problems.append(f"{path.name}:{line}: {target}: no heading '#{anchor}' in {dest.name}")
    return problems


def is_ignored(repo: Path, relpath: str) -> bool:
    """Whether git ignores this repository path (it need not exist)."""
    run = subprocess.run(
        ["git", "check-ignore", "-q", "--no-index", relpath], cwd=repo, capture_output=True, check=False
    )
    return run.returncode == 0


def cited_as_committed(path: Path, repo: Path = REPO_ROOT) -> list[str]:
    """Each repository path under a gitignored location that `path` cites without saying it is generated.

    A citation is a link target or an inline code span that looks like a repository path (a `/` in it, no
    spaces, not absolute, not `~`, not a URL or a flag). It is fine when its sentence says the file is
    written, created, built, downloaded or printed by something, or that it is not committed.
    """
    problems = []
    text = prose(path.read_text(encoding="utf-8"))
    # A link's target is relative to its file; a path in code is relative to the repository's root.
    citations = [(m.start(), m.group(1), True) for m in LINK.finditer(text)]
    citations += [(m.start(), m.group(1), False) for m in INLINE_CODE.finditer(text)]
    for start, raw, is_link in citations:
        cited = raw.split("#")[0].strip()
        if (
            "/" not in cited
            or " " in cited
            or cited.startswith(("/", "~", "-", "$"))
            or re.match(r"^[a-z][a-z0-9+.-]*:", cited, re.I)
        ):
            continue
        resolved = ((path.parent if is_link else repo) / cited).resolve()
        try:
            cited = resolved.relative_to(repo.resolve()).as_posix()
        except ValueError:
            continue  # outside the repository
        if not is_ignored(repo, cited):
            continue
        # The sentence around it: up to a full stop, a blank line, or a table cell's edge.
        before = re.split(r"(?:\.\s|\n\n|\|)", text[:start])[-1]
        after = re.split(r"(?:\.\s|\n\n|\|)", text[start:])[0]
        if not PRODUCED.search(before + after):
            line = text.count("\n", 0, start) + 1
            problems.append(f"{path.name}:{line}: `{raw}` is gitignored, yet cited as if committed")
    return problems


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    problems = broken_links(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_no_doc_cites_a_gitignored_file_as_committed(path: Path) -> None:
    problems = cited_as_committed(path)
    assert not problems, "\n".join(problems)


def test_readme_is_a_first_screen_of_at_most_200_lines() -> None:
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_the_docs_these_checks_cover_exist() -> None:
    """The checks above pass vacuously if their files vanish: the README links into docs/ and research/."""
    names = {p.relative_to(REPO_ROOT).as_posix() for p in doc_files()}
    assert {"README.md", "CHANGELOG.md", "docs/architecture.md", "docs/search.md"} <= names
    assert any(n.startswith("research/") for n in names)


def test_the_checker_finds_a_missing_file_a_missing_anchor_and_a_cited_ignored_file(tmp_path: Path) -> None:
    """The link and citation checks report what they exist to catch, in a throwaway repository."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("bench/results/\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Two words\n", encoding="utf-8")
    doc = tmp_path / "README.md"
    doc.write_text(
        "# Top\n\n"
        "[ok](docs/a.md#two-words) [self](#top) [web](https://example.com/x)\n"
        "[gone](docs/missing.md) [bad anchor](docs/a.md#three-words)\n\n"
        "```\n[in code](nowhere.md)\n```\n\n"
        "The figures are in `bench/results/search.json`.\n\n"
        "`bench/search.py` writes them to `bench/results/search.json`.\n",
        encoding="utf-8",
    )
    assert broken_links(doc) == [
        "README.md:4: docs/missing.md: no such file",
        "README.md:4: docs/a.md#three-words: no heading '#three-words' in a.md",
    ]
    assert cited_as_committed(doc, repo=tmp_path) == [
        "README.md:10: `bench/results/search.json` is gitignored, yet cited as if committed"
    ]


def test_slugs_follow_github() -> None:
    assert slug("Research messages (`lexvoz.research`)") == "research-messages-lexvozresearch"
    assert slug("Scaling out: a livekit-server cluster") == "scaling-out-a-livekit-server-cluster"
    assert slug("Today's figures") == "todays-figures"
    assert slug("heldout_callers") == "heldout_callers"
