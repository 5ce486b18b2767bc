"""`ledger export --output FILE`: the export is a new owner-only file, never written through what was there."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from agent.ops.ledger.cli import ledger_main
from tests.ledger_helpers import entry, write

DAY = ["--since", "2025-03-03", "--until", "2025-03-03"]


@pytest.fixture
async def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.sqlite3"
    await write(path, entry(room="r1", turn=1), entry(room="r2", turn=2))
    return path


def _rooms(out: Path) -> list[str]:
    return [json.loads(line)["room"] for line in out.read_text(encoding="utf-8").splitlines()]


def test_export_replaces_an_existing_readable_file_with_an_owner_only_one(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    out.write_text("an older export\n", encoding="utf-8")
    out.chmod(0o644)
    assert ledger_main(["export", *DAY, "--path", str(ledger), "--output", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert _rooms(out) == ["r1", "r2"]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


def test_export_never_writes_through_a_symbolic_link(ledger: Path, tmp_path: Path) -> None:
    victim = tmp_path / "someone-elses-file"
    victim.write_text("keep me\n", encoding="utf-8")
    victim.chmod(0o644)
    out = tmp_path / "export.jsonl"
    out.symlink_to(victim)
    assert ledger_main(["export", *DAY, "--path", str(ledger), "--output", str(out)]) == 0
    # the link itself was replaced by the export; what it pointed at is untouched, mode included
    assert not out.is_symlink() and _rooms(out) == ["r1", "r2"]
    assert stat.S_IMODE(out.lstat().st_mode) == 0o600
    assert victim.read_text(encoding="utf-8") == "keep me\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


def test_failed_export_leaves_the_previous_file_whole(tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    out.write_text("yesterday's export\n", encoding="utf-8")
    missing = tmp_path / "no-ledger.sqlite3"
    assert ledger_main(["export", *DAY, "--path", str(missing), "--output", str(out)]) == 1
    assert out.read_text(encoding="utf-8") == "yesterday's export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.jsonl"]


def test_export_into_a_missing_folder_is_a_one_line_error(
    ledger: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ledger_main(["export", *DAY, "--path", str(ledger), "--output", str(tmp_path / "nope" / "x.jsonl")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ledger: ")
