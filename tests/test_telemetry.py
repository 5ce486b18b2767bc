"""Tracing: span names and attributes, nesting in LiveKit's spans, no query text, no credentials."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agent.ops import telemetry
from agent.ops.digest import query_digest

QUERY = "Mi cédula es 8-123-4567: ¿qué dice el artículo 72?"
ENDPOINT = "https://lexvoz:s3cr3t-token@search.example.test:8765/mcp?token=abc123#frag"


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    exp = InMemorySpanExporter()
    provider = telemetry.setup_tracing(SimpleNamespace(otlp_endpoint=None), span_processors=[SimpleSpanProcessor(exp)])
    assert isinstance(provider, TracerProvider)
    return exp


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> InMemorySpanExporter:
    exporter.clear()
    return exporter


def _everything(span: ReadableSpan) -> str:
    parts = [span.name, repr(dict(span.attributes or {})), str(span.status.description)]
    for event in span.events:
        parts += [event.name, repr(dict(event.attributes or {}))]
    return " ".join(parts)


def test_nothing_configured_means_no_provider() -> None:
    assert telemetry.setup_tracing(SimpleNamespace(otlp_endpoint=None)) is None


def test_otlp_url() -> None:
    assert telemetry._traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert telemetry._traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert telemetry._traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"


def test_tool_call_span(spans: InMemorySpanExporter) -> None:
    with telemetry.span_tool_call("search_panama_law", 3, QUERY) as span:
        telemetry.record_error(span, "timeout", recoverable=True)
        telemetry.set_outcome(span, "completed")
    (done,) = spans.get_finished_spans()
    assert done.name == "voice.mcp.tool_call"
    attrs = dict(done.attributes or {})
    assert attrs["voice.mcp.tool"] == "search_panama_law"
    assert attrs["voice.turn"] == 3
    assert attrs["voice.mcp.query_digest"] == query_digest(QUERY)
    assert attrs["voice.mcp.outcome"] == "completed"
    assert attrs["voice.mcp.duration_ms"] >= 0
    (event,) = done.events
    assert event.name == "voice.mcp.error"
    assert dict(event.attributes or {}) == {"kind": "timeout", "recoverable": True}
    assert done.status.status_code != StatusCode.ERROR
    text = _everything(done)
    assert "8-123-4567" not in text and "artículo 72" not in text and "cédula" not in text


def test_tool_call_exception_marks_failed_without_message(spans: InMemorySpanExporter) -> None:
    with pytest.raises(RuntimeError), telemetry.span_tool_call("search_panama_law", 1, QUERY) as span:
        telemetry.record_error(span, "transport", recoverable=False)
        raise RuntimeError(f"server said: no results for {QUERY}")
    (done,) = spans.get_finished_spans()
    assert done.attributes["voice.mcp.outcome"] == "failed"  # type: ignore[index]
    assert done.status.status_code == StatusCode.ERROR
    assert "8-123-4567" not in _everything(done)
    assert "no results" not in _everything(done)


def test_connect_span_strips_credentials(spans: InMemorySpanExporter) -> None:
    with telemetry.span_connect(ENDPOINT) as span:
        span.set_attribute(telemetry.ATTR_TOOL_COUNT, 1)
    (done,) = spans.get_finished_spans()
    assert done.name == "voice.mcp.connect"
    assert done.attributes["voice.mcp.endpoint"] == "https://search.example.test:8765/mcp"  # type: ignore[index]
    assert done.attributes["voice.mcp.tool_count"] == 1  # type: ignore[index]
    text = _everything(done)
    for secret in ("s3cr3t-token", "lexvoz:", "abc123", "frag"):
        assert secret not in text


def test_safe_endpoint_variants() -> None:
    assert telemetry.safe_endpoint("http://127.0.0.1:8765/mcp") == "http://127.0.0.1:8765/mcp"
    assert telemetry.safe_endpoint("http://u:p@[::1]:8765/mcp?x=1") == "http://[::1]:8765/mcp"
    assert telemetry.safe_endpoint("http://[bad") == "invalid-url"


def test_spans_nest_inside_livekit_spans(spans: InMemorySpanExporter) -> None:
    from livekit.agents.telemetry import tracer as lk_tracer

    with lk_tracer.start_as_current_span("function_tool") as parent:
        with telemetry.span_tool_call("search_panama_law", 1, QUERY):
            pass
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert set(finished) == {"function_tool", "voice.mcp.tool_call"}
    child = finished["voice.mcp.tool_call"]
    assert child.parent is not None
    assert child.parent.span_id == parent.get_span_context().span_id
    assert child.context.trace_id == parent.get_span_context().trace_id
