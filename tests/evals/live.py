"""Live mode: which model the evals talk to, and the LLM judge with its reasons.

Live runs are opt-in (`LEXVOZ_EVALS_LIVE=auto`, which `make evals` sets): a developer who keeps
OPENAI_API_KEY in the environment must not spend tokens, or depend on the network, in `make test`.
`auto` goes live when the key is set (environment or `.env`) and stays offline otherwise; `1` insists.

The judge is livekit-agents' own (`ChatMessageAssert.judge`), which raises with the judge's reason on a
failure but keeps it to itself on a pass. It records the reason on its OpenTelemetry span, so the live run
installs an in-memory span exporter and reads it from there; nothing leaves the process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from livekit.agents.telemetry import set_tracer_provider
from livekit.agents.telemetry.trace_types import ATTR_FUNCTION_TOOL_OUTPUT
from livekit.agents.voice.run_result import ChatMessageAssert
from livekit.plugins import openai
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent.settings import Settings

LIVE_ENV = "LEXVOZ_EVALS_LIVE"
JUDGE_MODEL_ENV = "LEXVOZ_EVALS_JUDGE_MODEL"
DEFAULT_JUDGE_MODEL = "gpt-4.1-mini"
JUDGE_SPAN = "judge_evaluation"
SKIP_REASON = "the LLM judge runs only live (make evals with OPENAI_API_KEY)"


def live_settings() -> Settings | None:
    """The settings of the real model when this run is live, else None (offline, against the stand-in)."""
    flag = os.environ.get(LIVE_ENV, "").strip().lower()
    if flag in ("", "0", "no", "false", "off"):
        return None
    if flag not in ("auto", "1", "yes", "true", "on"):
        raise pytest.UsageError(f"{LIVE_ENV} must be auto, 1 or 0 (got {flag!r})")
    settings = Settings()
    if settings.openai_api_key is None:
        if flag == "auto":
            return None
        raise pytest.UsageError(f"{LIVE_ENV}={flag} needs OPENAI_API_KEY")
    return settings.model_copy(update={"rehearsal": False})


@dataclass(frozen=True)
class Judgement:
    passed: bool
    reason: str


class Judge:
    """The framework's intent judge on a text model, keeping the reason of every verdict."""

    def __init__(self, settings: Settings) -> None:
        assert settings.openai_api_key is not None
        extra = {"base_url": str(settings.openai_base_url)} if settings.openai_base_url else {}
        self.llm = openai.LLM(
            model=os.environ.get(JUDGE_MODEL_ENV, DEFAULT_JUDGE_MODEL),
            api_key=settings.openai_api_key.get_secret_value(),
            **extra,
        )
        self._spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self._spans))
        set_tracer_provider(provider, allow_pii=True)  # the reason is an attribute LiveKit marks as content

    async def judge(self, message: ChatMessageAssert, intent: str) -> Judgement:
        self._spans.clear()
        try:
            await message.judge(self.llm, intent=intent)
        except AssertionError as exc:
            first = str(exc).splitlines()[0]
            return Judgement(False, first.removeprefix("Judgement failed: "))
        return Judgement(True, self._last_reason() or "(the judge gave no reason)")

    def _last_reason(self) -> str | None:
        for span in reversed(self._spans.get_finished_spans()):
            if span.name == JUDGE_SPAN and span.attributes:
                reason = span.attributes.get(ATTR_FUNCTION_TOOL_OUTPUT)
                if reason is not None:
                    return str(reason)
        return None

    async def aclose(self) -> None:
        """Close the client and hand livekit-agents back the process-wide provider it started with."""
        await self.llm.aclose()
        set_tracer_provider(trace.get_tracer_provider())
