"""Metrics: counters move, labels pre-exist, the scrape endpoint serves them, job processes aggregate."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client import multiprocess as mp
from prometheus_client.parser import text_string_to_metric_families

from agent.contract import OUTCOMES, REQUEST_FAILURE_REASONS
from agent.ops import metrics
from agent.settings import get_settings


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


# --- the multiprocess directory is private -------------------------------------------------------------


def _plant_victim(tmp_path: Path) -> Path:
    """What another local user aims at: a folder holding the ledger and the digest key."""
    victim = tmp_path / "var"
    victim.mkdir()
    (victim / "ledger.db").write_text("ledger")
    (victim / "digest.key").write_text("key")
    return victim


@pytest.fixture
def worker_with_metrics(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """The worker module with metrics on, the temporary folder at `tmp_path`, no PROMETHEUS_MULTIPROC_DIR."""
    monkeypatch.setenv("LEXVOZ_REHEARSAL", "1")
    # empty counts as unset; setting it first lets monkeypatch restore the variable the worker exports
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    get_settings.cache_clear()
    import agent.worker as module

    monkeypatch.setattr(module, "settings", module.settings.model_copy(update={"prometheus_port": 0}))
    yield module
    get_settings.cache_clear()


def test_worker_metrics_dir_is_a_new_private_one_per_run_not_the_planted_shared_path(
    worker_with_metrics: Any, tmp_path: Path
) -> None:
    victim = _plant_victim(tmp_path)
    (tmp_path / "lexvoz-prometheus").symlink_to(victim)  # the old fixed name, planted by someone else
    chosen = Path(worker_with_metrics._multiproc_dir())
    assert chosen.parent == tmp_path and chosen.name.startswith("lexvoz-prometheus-"), chosen
    assert not chosen.is_symlink() and stat.S_IMODE(chosen.stat().st_mode) == 0o700
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(chosen)
    assert sorted(p.name for p in victim.iterdir()) == ["digest.key", "ledger.db"]


def test_worker_refuses_a_symlinked_multiproc_dir_with_one_line(
    worker_with_metrics: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "lexvoz-prometheus"
    link.symlink_to(_plant_victim(tmp_path))
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(link))
    with pytest.raises(SystemExit) as stopped:
        worker_with_metrics._multiproc_dir()
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "PROMETHEUS_MULTIPROC_DIR" in err[0] and "symbolic link" in err[0], err


def test_worker_checks_a_set_multiproc_dir_even_with_metrics_off(
    worker_with_metrics: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """livekit-agents takes PROMETHEUS_MULTIPROC_DIR from the environment and clears it whatever the port."""
    monkeypatch.setattr(
        worker_with_metrics, "settings", worker_with_metrics.settings.model_copy(update={"prometheus_port": None})
    )
    assert worker_with_metrics._multiproc_dir() is None
    link = tmp_path / "prom"
    link.symlink_to(_plant_victim(tmp_path))
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(link))
    with pytest.raises(SystemExit):
        worker_with_metrics._multiproc_dir()


@pytest.mark.parametrize("problem", ["writable by others", "not a directory", "another user"])
def test_an_operator_multiproc_dir_others_could_write_to_is_refused(tmp_path: Path, problem: str) -> None:
    path = tmp_path / "prom"
    if problem == "not a directory":
        path.write_text("")
    else:
        path.mkdir()
        if problem == "writable by others":
            path.chmod(0o777)
        elif os.geteuid() == 0:
            os.chown(path, 54321, 54321)
        else:
            path = Path("/")  # owned by root, never by this user
    with pytest.raises(metrics.MultiprocessDirError, match="PROMETHEUS_MULTIPROC_DIR"):
        metrics.check_private_dir(path)


def test_an_absent_operator_multiproc_dir_is_created_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wanted = tmp_path / "prom"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(wanted))
    assert metrics.private_multiprocess_dir() == wanted
    assert stat.S_IMODE(wanted.stat().st_mode) == 0o700


def test_stale_cleanup_of_a_symlinked_dir_deletes_nothing_outside(tmp_path: Path) -> None:
    victim = _plant_victim(tmp_path)
    link = tmp_path / "prom"
    link.symlink_to(victim)
    try:
        metrics.setup_multiprocess_dir(link)
    except Exception as exc:  # the refusal is checked below, after what matters
        refused: Exception | None = exc
    else:
        refused = None
    finally:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    assert sorted(p.name for p in victim.iterdir()) == ["digest.key", "ledger.db"]
    assert isinstance(refused, metrics.MultiprocessDirError), refused


def test_stale_cleanup_removes_names_in_the_dir_and_follows_no_link(tmp_path: Path) -> None:
    victim = _plant_victim(tmp_path)
    mpdir = tmp_path / "prom"
    mpdir.mkdir(mode=0o700)
    (mpdir / "counter_1.db").write_bytes(b"old")
    (mpdir / "gauge_2.db").symlink_to(victim / "ledger.db")
    (mpdir / "sub.db").mkdir()
    try:
        metrics.setup_multiprocess_dir(mpdir)
    finally:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    assert sorted(p.name for p in mpdir.iterdir()) == ["sub.db"]
    assert (victim / "ledger.db").read_text() == "ledger"


_JOB = """
from agent.ops import metrics
metrics.mcp_requests_total.inc()
print(metrics.private_multiprocess_dir())
"""


def test_job_processes_share_the_worker_private_dir_and_it_goes_at_exit(tmp_path: Path) -> None:
    """The worker's process makes the directory; a job process inherits the variable and writes there."""
    env = {k: v for k, v in os.environ.items() if k.upper() != "PROMETHEUS_MULTIPROC_DIR"}
    env["TMPDIR"] = str(tmp_path)
    worker = (
        "import os, subprocess, sys\n"
        "from agent.ops import metrics\n"
        "d = metrics.private_multiprocess_dir()\n"
        f"job = subprocess.run([sys.executable, '-c', {_JOB!r}], capture_output=True, text=True, check=True)\n"
        "print(d, job.stdout.strip(), sorted(os.listdir(d)))\n"
    )
    done = subprocess.run([sys.executable, "-c", worker], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    made, seen_by_job, files = done.stdout.split(" ", 2)
    assert Path(made).parent == tmp_path and seen_by_job == made
    assert "counter_" in files  # the job process wrote its counter there
    assert not Path(made).exists()  # removed when the worker's process exited


def test_worker_start_writes_nothing_through_a_planted_multiproc_dir_link(tmp_path: Path) -> None:
    """`python -m agent start` refuses a symlinked PROMETHEUS_MULTIPROC_DIR before livekit-agents is imported:
    prometheus_client writes metric files there as soon as livekit-agents creates its metrics at import."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "prom"
    link.symlink_to(target)
    env = {k: v for k, v in os.environ.items() if k.upper() != "PROMETHEUS_MULTIPROC_DIR"}
    env.update(PROMETHEUS_MULTIPROC_DIR=str(link), LEXVOZ_REHEARSAL="1", LEXVOZ_LEDGER_PATH=str(tmp_path / "l.db"))
    done = subprocess.run(
        [sys.executable, "-m", "agent", "start"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "is a symbolic link" in done.stderr
    assert list(target.iterdir()) == []
