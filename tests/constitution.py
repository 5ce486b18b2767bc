"""Where the tests get the Constitution JSON: beside the checkout, from the cache, or downloaded once.

The legal text is never committed. A team's checkout usually has it in `../shared/data/`; a stranger's clone
does not, and then the tests download it from the pinned URL, check its sha256 and keep it in a cache outside
the repository (like livekit-server), so `make test` tests the search for everyone. Only when neither works
do the tests that need it skip, and the run ends by saying how many and why (see `tests/conftest.py`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from panama_law.ingest import corpus
from panama_law.settings import SOURCE_SHA256, SOURCE_URL

REPO_ROOT = Path(__file__).resolve().parents[1]
BESIDE_CHECKOUT = REPO_ROOT.parent / "shared" / "data" / "constitucion_panama.json"
ENV_OVERRIDE = "LEXVOZ_TEST_CONSTITUTION"


def cache_path() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lexvoz" / f"constitucion_panama-{SOURCE_SHA256[:12]}.json"


@dataclass(frozen=True)
class Lookup:
    """The file to use, or None and the one-line reason the dependent tests skip."""

    path: Path | None
    why_missing: str = ""


def _verified(path: Path) -> bool:
    try:
        corpus.verify_checksum(path.read_bytes(), SOURCE_SHA256)
    except (OSError, corpus.CorpusError):
        return False
    return True


def find_or_download(*, url: str = SOURCE_URL, cache: Path | None = None) -> Lookup:
    """The first checksum-valid copy of: $LEXVOZ_TEST_CONSTITUTION, ../shared/data, the cache; else download."""
    explicit = os.environ.get(ENV_OVERRIDE)
    if explicit:
        path = Path(explicit)
        return Lookup(path) if _verified(path) else Lookup(None, f"{ENV_OVERRIDE}={explicit} is missing or altered")
    target = cache or cache_path()
    for candidate in (BESIDE_CHECKOUT, target):
        if candidate.is_file() and _verified(candidate):
            return Lookup(candidate)
    print(f"downloading the Constitution (pinned, sha256-checked) into {target.parent} ...", file=sys.stderr)
    try:
        data = corpus.download(url, timeout_s=20)
        corpus.verify_checksum(data, SOURCE_SHA256)
    except corpus.CorpusError as exc:
        return Lookup(None, f"the Constitution is not beside the checkout and could not be downloaded ({exc})")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    partial.write_bytes(data)
    os.replace(partial, target)  # atomic: a concurrent run never reads half a file
    return Lookup(target)


@lru_cache(maxsize=1)
def lookup() -> Lookup:
    """Once per test process."""
    return find_or_download()


SKIP_PREFIX = "Constitution unavailable: "
"""Starts the skip reason of every test that needs the file; the run's closing line counts them."""


def require() -> Path:
    """The file, or skip the calling test (or fixture) with the reason."""
    import pytest

    found = lookup()
    if found.path is None:
        pytest.skip(SKIP_PREFIX + found.why_missing)
    return found.path
