"""OpenTelemetry tracing for the MCP gateway, nested in LiveKit's agent-turn spans.

One SDK TracerProvider is shared with livekit-agents (through its `set_tracer_provider` hook), so
the spans we open while a tool runs become children of LiveKit's function-tool span and leave the
process through the same exporter. Nothing is exported unless OTEL_EXPORTER_OTLP_ENDPOINT is set.

Privacy: our spans carry a digest of the query, never its text, and endpoints without user info or
query strings. LiveKit's own spans would carry tool arguments and transcripts; we register the
provider with `allow_pii=False`, which makes LiveKit strip those before any exporter.

Job processes do not inherit a provider: call `setup_tracing` in each job process (in the job
entrypoint), and `shutdown_tracing` from its shutdown callback so the last spans are flushed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from agent.contract import Outcome
from agent.ops.digest import query_digest

__all__ = [
    "ATTR_DURATION_MS",
    "ATTR_ENDPOINT",
    "ATTR_OUTCOME",
    "ATTR_QUERY_DIGEST",
    "ATTR_TOOL",
    "ATTR_TOOL_COUNT",
    "ATTR_TURN",
    "ERROR_EVENT",
    "SPAN_CONNECT",
    "SPAN_TOOL_CALL",
    "record_error",
    "safe_endpoint",
    "set_outcome",
    "setup_tracing",
    "shutdown_tracing",
    "span_connect",
    "span_tool_call",
    "tracer",
]

SERVICE_NAME = "lexvoz-agent"
SPAN_CONNECT = "voice.mcp.connect"
SPAN_TOOL_CALL = "voice.mcp.tool_call"
ERROR_EVENT = "voice.mcp.error"

ATTR_ENDPOINT = "voice.mcp.endpoint"
ATTR_TOOL_COUNT = "voice.mcp.tool_count"
ATTR_TOOL = "voice.mcp.tool"
ATTR_TURN = "voice.turn"
ATTR_QUERY_DIGEST = "voice.mcp.query_digest"
ATTR_OUTCOME = "voice.mcp.outcome"
ATTR_DURATION_MS = "voice.mcp.duration_ms"


class _LexvozTracer(trace.Tracer):
    """`trace.get_tracer("lexvoz")` bound to the provider from `setup_tracing`.

    The global provider can be set once per process; binding here instead keeps `setup_tracing`
    re-callable (tests, a job process that re-initialises) and never fights another library.
    """

    def __init__(self) -> None:
        self._provider: trace.TracerProvider | None = None
        self._tracer: trace.Tracer = trace.get_tracer("lexvoz")

    def _bind(self, provider: trace.TracerProvider | None) -> None:
        self._provider = provider
        self._tracer = trace.get_tracer("lexvoz", tracer_provider=provider)

    def start_span(self, *args: Any, **kwargs: Any) -> Span:
        return self._tracer.start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        """The current provider's own context manager, returned as is (the proxy only picks the provider)."""
        return self._tracer.start_as_current_span(*args, **kwargs)


tracer = _LexvozTracer()
_global_set = False


def _traces_url(endpoint: str) -> str:
    """OTEL_EXPORTER_OTLP_ENDPOINT is the collector's base URL; OTLP/HTTP traces go to /v1/traces."""
    base = endpoint.rstrip("/")
    return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


def setup_tracing(settings: Any, *, span_processors: Sequence[SpanProcessor] = ()) -> TracerProvider | None:
    """Create and register the SDK provider; returns None (and changes nothing) when there is
    nowhere to send spans: no OTLP endpoint in settings and no extra `span_processors`."""
    endpoint = getattr(settings, "otlp_endpoint", None)
    if endpoint is None and not span_processors:
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    if endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=_traces_url(str(endpoint)))))
    for processor in span_processors:
        provider.add_span_processor(processor)

    from livekit.agents.telemetry import set_tracer_provider

    set_tracer_provider(provider, allow_pii=False)
    tracer._bind(provider)
    global _global_set
    if not _global_set:
        # lets other instrumented libraries share it; the SDK refuses a second override anyway
        trace.set_tracer_provider(provider)
        _global_set = True
    return provider


def shutdown_tracing(provider: TracerProvider | None, timeout_s: float = 5.0) -> None:
    """Flush and stop `provider` (a no-op for None)."""
    if provider is not None:
        provider.force_flush(int(timeout_s * 1000))
        provider.shutdown()


def safe_endpoint(url: str) -> str:
    """The URL without user info, query string or fragment: safe to put in a span or a log."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "invalid-url"


@contextmanager
def span_connect(endpoint: str) -> Iterator[Span]:
    """Span `voice.mcp.connect` around opening the MCP session. Set the listed tool count on it
    with `span.set_attribute(ATTR_TOOL_COUNT, n)` once known."""
    with tracer.start_as_current_span(
        SPAN_CONNECT,
        kind=SpanKind.CLIENT,
        attributes={ATTR_ENDPOINT: safe_endpoint(endpoint)},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            _fail(span, exc)
            raise


@contextmanager
def span_tool_call(tool: str, turn: int, query: str) -> Iterator[Span]:
    """Span `voice.mcp.tool_call` around one tool call. Carries the query digest, never the text.

    Duration is set on exit; the outcome is what `set_outcome` set, or "failed" if an exception
    escapes first.
    """
    started = time.perf_counter()
    with tracer.start_as_current_span(
        SPAN_TOOL_CALL,
        kind=SpanKind.CLIENT,
        attributes={ATTR_TOOL: tool, ATTR_TURN: turn, ATTR_QUERY_DIGEST: query_digest(query)},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            if not _has_outcome(span):
                span.set_attribute(ATTR_OUTCOME, "failed")
            _fail(span, exc)
            raise
        finally:
            span.set_attribute(ATTR_DURATION_MS, round((time.perf_counter() - started) * 1000, 3))


def _has_outcome(span: Span) -> bool:
    attributes = getattr(span, "attributes", None)
    return bool(attributes) and ATTR_OUTCOME in attributes  # type: ignore[operator]


def _fail(span: Span, exc: BaseException) -> None:
    # only the type: exception messages can quote the user's words
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
    span.set_attribute("error.type", type(exc).__name__)


def set_outcome(span: Span, outcome: Outcome) -> None:
    """Record the call's outcome (the shared vocabulary: completed, failed, discarded, duplicate)."""
    span.set_attribute(ATTR_OUTCOME, outcome)
    if outcome == "failed":
        span.set_status(Status(StatusCode.ERROR))


def record_error(span: Span, kind: str, recoverable: bool) -> None:
    """Add a `voice.mcp.error` event. A recoverable error (retried, or answered with a fallback)
    leaves the span's status alone; an unrecoverable one marks it as an error."""
    span.add_event(ERROR_EVENT, {"kind": kind, "recoverable": recoverable})
    if not recoverable:
        span.set_status(Status(StatusCode.ERROR, kind))
