"""What every job process would build for itself while its person waits, built once in livekit-agents' forkserver
(`worker.PRELOAD_MODULES`) instead: every job process inherits it.

The Realtime protocol's event models: the openai package defers building each pydantic model's validator until
its first use (`defer_build`), so every job process built the Realtime events it sends and reads again while its
room waited: py-spy on job processes under load found that building at about 2 % of their busy samples, and
building all of them takes about 0.15 s of CPU on an idle host. livekit-agents' `llm.ChatMessage` is likewise built
on a job's first message.

Two more, found by py-spy on a job process from the job request to the agent listening (about 0.6 s of CPU in
all on an idle host; ten arriving at once on two cores wait for each other's): livekit-agents' hyphenation
patterns, which the transcript pacing builds on a conversation's first words (about 50 ms), and the MCP client's
TLS context (`agent.mcp.transport.tls_context`, about 30-50 ms).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

import openai.types.realtime as realtime_types
from livekit.agents import llm, tokenize
from pydantic import BaseModel

from agent.mcp.transport import tls_context


def _build(values: Iterable[object]) -> int:
    """Build each pydantic model among `values` that is not built yet; how many were built."""
    built = 0
    for value in values:
        if isinstance(value, type) and issubclass(value, BaseModel) and not value.__pydantic_complete__:
            value.model_rebuild()
            built += 1
    return built


def build_realtime_models() -> int:
    """Build every model of `openai.types.realtime`, and livekit-agents' public `llm` models, not built yet."""
    built = _build(vars(llm).values())  # `llm.ChatMessage` would wait for a job's first message otherwise
    for info in pkgutil.iter_modules(realtime_types.__path__, f"{realtime_types.__name__}."):
        module = importlib.import_module(info.name)
        built += _build(v for v in vars(module).values() if getattr(v, "__module__", None) == module.__name__)
    return built


def build_job_caches() -> None:
    """The hyphenation patterns (cached by livekit-agents on first use) and the MCP client's TLS context."""
    tokenize.basic.hyphenate_word("constitución")
    tls_context()


BUILT = build_realtime_models()
build_job_caches()
