"""Metrics: counters move, labels pre-exist, the scrape endpoint serves them, job processes aggregate."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client import multiprocess as mp
from prometheus_client.parser import text_string_to_metric_families

from agent.contract import OUTCOMES, REQUEST_FAILURE_REASONS
from agent.ops import metrics


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return _samples(resp.read().decode())


@pytest.fixture(scope="module")
def port() -> int:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        pytest.skip("this test process runs in multiprocess mode")
    return metrics.start_metrics_server(0)


def test_labels_are_preinitialised(port: int) -> None:
    s = _scrape(port)
    for kind in REQUEST_FAILURE_REASONS:
        assert ("voice_mcp_request_errors_total", (("kind", kind),)) in s
    for outcome in OUTCOMES:
        assert ("voice_mcp_tool_calls_total", (("outcome", outcome), ("tool", "search_panama_law"))) in s
    for name in (
        "voice_mcp_requests_total",
        "voice_mcp_timeouts_total",
        "voice_ledger_write_failures_total",
        "voice_ledger_dropped_total",
        "voice_mcp_circuit_breaker_state",
        "voice_sessions_active",
        "voice_mcp_latency_ms_count",
    ):
        assert (name, ()) in s, name


def test_counters_increment_and_scrape(port: int) -> None:
    before = _scrape(port)
    metrics.mcp_requests_total.inc()
    metrics.mcp_request_errors_total.labels(kind="timeout").inc()
    metrics.mcp_timeouts_total.inc()
    metrics.mcp_tool_calls_total.labels(tool="search_panama_law", outcome="completed").inc(2)
    metrics.mcp_latency_ms.observe(42.0)
    metrics.mcp_circuit_breaker_state.set(metrics.BREAKER_OPEN)
    metrics.sessions_active.inc()
    try:
        after = _scrape(port)
    finally:
        metrics.mcp_circuit_breaker_state.set(metrics.BREAKER_CLOSED)
        metrics.sessions_active.dec()

    def delta(name: str, labels: tuple[tuple[str, str], ...] = ()) -> float:
        return after[(name, labels)] - before[(name, labels)]

    assert delta("voice_mcp_requests_total") == 1
    assert delta("voice_mcp_request_errors_total", (("kind", "timeout"),)) == 1
    assert delta("voice_mcp_timeouts_total") == 1
    assert delta("voice_mcp_tool_calls_total", (("outcome", "completed"), ("tool", "search_panama_law"))) == 2
    assert delta("voice_mcp_latency_ms_count") == 1
    assert delta("voice_mcp_latency_ms_bucket", (("le", "50.0"),)) == 1
    assert delta("voice_mcp_latency_ms_bucket", (("le", "25.0"),)) == 0
    assert after[("voice_mcp_circuit_breaker_state", ())] == 1
    assert delta("voice_sessions_active") == 1


_CHILD = """
import sys
from agent.ops import metrics
metrics.mcp_requests_total.inc(int(sys.argv[1]))
metrics.mcp_tool_calls_total.labels(tool="search_panama_law", outcome="failed").inc()
metrics.sessions_active.inc()
if sys.argv[2] == "exit":
    metrics.sessions_active.dec()
    metrics.release_process_gauges()
"""


def test_job_processes_reach_one_scrape(tmp_path: Path) -> None:
    """Two 'job processes' write to the multiprocess dir; one collector sums them."""
    mpdir = tmp_path / "prom"
    env = dict(os.environ)
    # the child imports prometheus_client with the variable already set, as a spawned job does
    env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics.setup_multiprocess_dir(mpdir))
    try:
        for n, mode in ((2, "stay"), (3, "exit")):
            subprocess.run([sys.executable, "-c", _CHILD, str(n), mode], env=env, check=True, timeout=60)
    finally:
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]
    registry = CollectorRegistry()
    mp.MultiProcessCollector(registry, path=str(mpdir))
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in registry.collect() for s in f.samples}
    assert values[("voice_mcp_requests_total", ())] == 5
    assert values[("voice_mcp_tool_calls_total", (("outcome", "failed"), ("tool", "search_panama_law")))] == 2
    # the exited process released its live gauge; the other one still counts
    assert values[("voice_sessions_active", ())] == 1


def test_setup_multiprocess_dir_clears_stale_files(tmp_path: Path) -> None:
    mpdir = tmp_path / "prom"
    mpdir.mkdir()
    (mpdir / "counter_123.db").write_bytes(b"old")
    (mpdir / "keep.txt").write_text("x")
    try:
        assert metrics.setup_multiprocess_dir(mpdir) == mpdir
        assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(mpdir)
    finally:
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]
    assert not (mpdir / "counter_123.db").exists()
    assert (mpdir / "keep.txt").exists()
