"""Shared by the page service's tests: settings built from explicit values only, and a built page stand-in."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.settings import Settings

API_KEY = "test-key"
# Spent resume tokens of the tests' page services: one private folder per test process, never the checkout,
# removed when that process ends (each run left one behind in the temp folder).
_SPENT_DIR = tempfile.mkdtemp(prefix="lexvoz-spent-")
atexit.register(shutil.rmtree, _SPENT_DIR, ignore_errors=True)
SPENT_TOKENS_FILE = Path(_SPENT_DIR) / "spent-resume-tokens.sqlite3"
API_SECRET = "test-secret-that-must-never-leak-0123456789"

ClientFactory = Callable[..., Any]


def make_settings(**overrides: Any) -> Settings:
    """Settings built from explicit values only: no `.env`, no environment surprises."""
    values: dict[str, Any] = {
        "LIVEKIT_URL": "ws://127.0.0.1:7880",
        "LIVEKIT_API_KEY": API_KEY,
        "LIVEKIT_API_SECRET": API_SECRET,
        "LEXVOZ_AGENT_NAME": "lexvoz-test",
        "LEXVOZ_TOKEN_TTL_S": 600,
        "LEXVOZ_TOKEN_REQUESTS_PER_MINUTE": 100,
        # the tests' sessions are never joined (the room count is a double): only the test of that limit sets it
        "LEXVOZ_MAX_PENDING_SESSIONS_PER_CLIENT": 100,
        "LEXVOZ_SPENT_TOKENS_PATH": SPENT_TOKENS_FILE,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def built_page(tmp_path: Path) -> Path:
    """A stand-in for `web/dist`: an index page, one hashed asset, and a secret file just outside it."""
    root = tmp_path / "dist"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html><title>Lexvoz</title>", encoding="utf-8")
    (root / "assets" / "index-abc123.js").write_text("console.log('lexvoz')", encoding="utf-8")
    (root / ".hidden").write_text("nope", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("outside", encoding="utf-8")
    return root


class FakeCensus:
    """livekit-server's rooms as `capacity.Capacity` sees them: occupied ones (`rooms`), empty ones that still
    exist (`existing`), or a failure."""

    def __init__(self, rooms: set[str] | None = None) -> None:
        self.rooms: set[str] = rooms if rooms is not None else set()
        self.existing: set[str] = set()
        self.fail: Exception | None = None
        self.calls = 0

    async def our_rooms(self) -> dict[str, int]:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return {**dict.fromkeys(self.existing, 0), **dict.fromkeys(self.rooms, 1)}
