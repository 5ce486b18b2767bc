"""Building livekit-server on first run says what it is doing, and a failed build says why."""

from __future__ import annotations

import os

import pytest

from agent.devstack import livekit_server

FAKE_GO = (
    "for i in 1 2 3; do echo 'go: downloading example.com/m$i v1.0.0' >&2; done; "
    'for p in a b c d; do echo "example.com/pkg/$p" >&2; done; exit ${FAIL:-0}'
)


def test_a_long_build_reports_progress(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(livekit_server, "PROGRESS_EVERY_S", 0.0)
    livekit_server._go_install_with_progress(["bash", "-c", FAKE_GO], dict(os.environ), log=True)
    err = capsys.readouterr().err
    assert "3 modules downloaded, 4 packages compiled" in err
    assert "livekit-server built in" in err


def test_a_failed_build_names_what_go_said(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(livekit_server.LiveKitServerMissing) as info:
        livekit_server._go_install_with_progress(["bash", "-c", FAKE_GO], {**os.environ, "FAIL": "1"}, log=False)
    assert "go install failed" in str(info.value)
    assert "example.com/pkg/d" in str(info.value)
    assert capsys.readouterr().err == ""  # quiet when asked to be
