"""The worker module: load reporting and log redaction wiring."""

from __future__ import annotations

import importlib
import logging
from types import SimpleNamespace

import pytest

from agent.ops.redact import RedactingFilter
from agent.settings import get_settings


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LEXVOZ_REHEARSAL", "1")
    monkeypatch.setenv("LEXVOZ_MAX_JOBS", "4")
    get_settings.cache_clear()
    import agent.worker as module

    module = importlib.reload(module)
    yield module
    get_settings.cache_clear()


def test_load_is_the_share_of_job_slots_not_cpu(worker) -> None:
    def load(jobs: int) -> float:
        return worker.job_load(SimpleNamespace(active_jobs=[object()] * jobs))

    assert [load(n) for n in (0, 1, 2, 4, 9)] == [0.0, 0.25, 0.5, 1.0, 1.0]


def test_log_redaction_is_installed_once_on_every_root_handler(worker) -> None:
    handler = logging.StreamHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        worker.install_log_redaction()
        worker.install_log_redaction()
        assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1
    finally:
        root.removeHandler(handler)
