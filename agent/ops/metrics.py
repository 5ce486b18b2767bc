"""Prometheus metrics for the search path, the sessions and the evidence ledger.

Module-level metrics in the default registry, so any module can import and increment them. Every
label value is created up front: a dashboard or an alert on `rate(...{kind="timeout"}[5m])` then
sees a 0 instead of "no data" before the first failure.

Job processes: livekit-agents runs each job in a child process. prometheus_client keeps values in
process memory unless PROMETHEUS_MULTIPROC_DIR is set *before prometheus_client is imported*; then
every process writes its values to files in that directory and a `MultiProcessCollector` on the
scrape side sums them. `AgentServer(prometheus_port=..., prometheus_multiproc_dir=...)` sets the
variable for the job processes it spawns and serves `/metrics` from the main process with that
collector, so the job processes' counters reach the one endpoint. See `setup_multiprocess_dir`.

That directory is private to the worker's user: another local account that could plant a file or a
symbolic link there could falsify the counters, or, through the stale-file cleanup at start, have the
worker delete files elsewhere (the ledger, the digest key). So it is never a fixed shared path: without
PROMETHEUS_MULTIPROC_DIR the worker makes a fresh 0700 directory per run (`private_multiprocess_dir`)
and removes it at exit, and a directory the operator names is used only if it is a real directory of
this user that no one else may write to. The job processes inherit the variable and check the same.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client import multiprocess as _mp

from agent.contract import OUTCOMES, REQUEST_FAILURE_REASONS
from agent.ops.private_dir import MultiprocessDirError, check_private_dir, env_dir

__all__ = [
    "BREAKER_CLOSED",
    "BREAKER_HALF_OPEN",
    "BREAKER_OPEN",
    "CITATION_NORMS",
    "MODEL_FAILURE_CAUSES",
    "MultiprocessDirError",
    "check_private_dir",
    "citation_norm_label",
    "citations_total",
    "env_dir",
    "ledger_dropped_total",
    "ledger_write_failures_total",
    "mcp_circuit_breaker_state",
    "mcp_connection_events_total",
    "mcp_dropped_sources_total",
    "mcp_latency_ms",
    "mcp_partial_results_total",
    "mcp_request_errors_total",
    "mcp_requests_total",
    "mcp_timeouts_total",
    "mcp_tool_calls_total",
    "model_failures_total",
    "private_multiprocess_dir",
    "release_process_gauges",
    "scrape_registry",
    "sessions_active",
    "setup_multiprocess_dir",
    "start_metrics_server",
]

logger = logging.getLogger("lexvoz.metrics")

KNOWN_TOOLS: tuple[str, ...] = ("search_panama_law",)
# Why a conversation lost its voice model (agent/voice/model_link.py classifies; kept in step by a test).
MODEL_FAILURE_CAUSES: tuple[str, ...] = (
    "invalid_key",
    "forbidden",
    "unknown_model",
    "quota",
    "unreachable",
    "dropped",
    "model_error",
)

# What a citation the agent spoke names, as a bounded label: the Constitution, any law, another norm, or no
# norm at all ("el artículo 74"). Never the norm's own name: labels must not grow with what the agent says.
CITATION_NORMS: tuple[str, ...] = ("constitucion", "ley", "other", "none")

BREAKER_CLOSED = 0
BREAKER_OPEN = 1
BREAKER_HALF_OPEN = 2

MCP_LATENCY_BUCKETS_MS: tuple[float, ...] = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)

mcp_latency_ms = Histogram(
    "voice_mcp_latency_ms",
    "Round trip of one search tool call through the MCP gateway, in milliseconds.",
    buckets=MCP_LATENCY_BUCKETS_MS,
)
mcp_requests_total = Counter("voice_mcp_requests", "Requests sent to the MCP search server.")
mcp_request_errors_total = Counter("voice_mcp_request_errors", "Failed MCP requests by kind of failure.", ["kind"])
mcp_tool_calls_total = Counter(
    "voice_mcp_tool_calls", "Tool calls made by the model, by tool and outcome.", ["tool", "outcome"]
)
mcp_timeouts_total = Counter("voice_mcp_timeouts", "MCP requests that ran past their deadline.")
CONNECTION_EVENTS: tuple[str, ...] = ("connect", "reconnect", "disconnect", "connect_failed")
mcp_connection_events_total = Counter(
    "voice_mcp_connection_events",
    "MCP session lifecycle: connect, reconnect, disconnect, connect_failed.",
    ["event"],
)
mcp_partial_results_total = Counter(
    "voice_mcp_partial_results", "Search replies that were used although some of their sources were invalid."
)
mcp_dropped_sources_total = Counter("voice_mcp_dropped_sources", "Sources dropped from replies as invalid.")
mcp_circuit_breaker_state = Gauge(
    "voice_mcp_circuit_breaker_state",
    "Circuit breaker in front of the search server: 0 closed, 1 open, 2 half-open.",
    multiprocess_mode="livemax",
)
sessions_active = Gauge("voice_sessions_active", "Voice sessions currently running.", multiprocess_mode="livesum")
model_failures_total = Counter(
    "voice_model_failures", "Conversations that lost the voice model after the plugin's retries, by cause.", ["cause"]
)
ledger_write_failures_total = Counter(
    "voice_ledger_write_failures", "Failed attempts to write to the evidence ledger (each retry counts)."
)
ledger_dropped_total = Counter(
    "voice_ledger_dropped", "Ledger entries given up: queue full, permanent error, or unflushed at close."
)
citations_total = Counter(
    "voice_citations",
    "Articles the agent named while speaking, checked against the sources it was given, by norm and verified.",
    ["norm", "verified"],
)

for _kind in REQUEST_FAILURE_REASONS:
    mcp_request_errors_total.labels(kind=_kind)
for _event in CONNECTION_EVENTS:
    mcp_connection_events_total.labels(event=_event)
for _cause in MODEL_FAILURE_CAUSES:
    model_failures_total.labels(cause=_cause)
for _norm in CITATION_NORMS:
    for _verified in ("true", "false"):
        citations_total.labels(norm=_norm, verified=_verified)
for _tool in KNOWN_TOOLS:
    for _outcome in OUTCOMES:
        mcp_tool_calls_total.labels(tool=_tool, outcome=_outcome)


def citation_norm_label(norm: str | None) -> str:
    """The `norm` label of a spoken citation from its norm key ("constitucion", "ley 6 de 2002", None)."""
    if norm is None:
        return "none"
    if norm == "constitucion":
        return "constitucion"
    return "ley" if norm.startswith("ley ") else "other"


def scrape_registry() -> CollectorRegistry:
    """The registry to expose: every process's values in multiprocess mode, else the default one."""
    if env_dir():
        registry = CollectorRegistry()
        _mp.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # untyped in prometheus-client
        return registry
    return REGISTRY


def start_metrics_server(port: int, addr: str = "127.0.0.1") -> int:
    """Serve `/metrics` from a daemon thread; returns the bound port (pass 0 for an ephemeral one).

    Only for processes that are not a LiveKit worker (the search server, the web service): the
    worker should use `AgentServer(prometheus_port=...)`, which already serves the same registry.
    """
    server, _thread = start_http_server(port, addr=addr, registry=scrape_registry())
    return int(server.server_port)


def _private_existing_or_new(path: Path) -> Path:
    """`path` made 0700 if absent (its parent must exist; a link or file in its place stays and fails the check)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    check_private_dir(path)
    return path


def private_multiprocess_dir() -> Path:
    """The worker's metrics directory, exported as PROMETHEUS_MULTIPROC_DIR for the job processes it starts.

    An operator's PROMETHEUS_MULTIPROC_DIR (created 0700 if absent) after `check_private_dir`; else a new
    `lexvoz-prometheus-*` directory from `tempfile.mkdtemp` (0700, a name no one could have planted),
    removed when this process exits. A job process that imports the worker inherits the variable, so it
    checks and shares the same directory instead of making its own. Raises `MultiprocessDirError`.
    """
    provided = env_dir()
    if provided:
        directory = _private_existing_or_new(Path(provided))
    else:
        directory = Path(tempfile.mkdtemp(prefix="lexvoz-prometheus-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)  # rmtree never follows links
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    return directory


def setup_multiprocess_dir(path: str | os.PathLike[str]) -> Path:
    """Prepare `path` for prometheus multiprocess mode and export PROMETHEUS_MULTIPROC_DIR.

    For a process that is not a LiveKit worker (the worker gets `private_multiprocess_dir`, and
    livekit-agents clears the directory itself). `path` is created 0700 if absent and must pass
    `check_private_dir`. Stale `*.db` files from an earlier run are removed so counters restart from
    zero; the removal works on an open handle of the directory and unlinks names in it, so it never
    follows a symbolic link nor deletes outside the directory. Metrics already created in *this*
    process stay in memory: the variable is read when prometheus_client is imported, so to include the
    main process too set it in the environment (the container does).
    """
    directory = _private_existing_or_new(Path(path))
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for entry in os.scandir(fd):
            if not entry.name.endswith(".db") or entry.is_dir(follow_symlinks=False):
                continue
            try:
                os.unlink(entry.name, dir_fd=fd)
            except OSError:
                logger.warning("could not remove stale metrics file", extra={"file": entry.name})
    finally:
        os.close(fd)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    return directory


def release_process_gauges(pid: int | None = None) -> None:
    """Drop this process's live gauges (sessions, breaker state) from the multiprocess files.

    Call from a job's shutdown callback: livekit-agents does not mark dead job processes, and a
    crashed job would otherwise keep reporting its last `voice_sessions_active` value.
    """
    directory = env_dir()
    if directory:
        _mp.mark_process_dead(pid if pid is not None else os.getpid(), directory)  # type: ignore[no-untyped-call]
