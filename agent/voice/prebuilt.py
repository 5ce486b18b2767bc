"""What every job process would build for itself while its person waits, built once in livekit-agents' forkserver
(`worker.PRELOAD_MODULES`) instead: every job process inherits it.

The Realtime protocol's event models: the openai package defers building each pydantic model's validator until
its first use (`defer_build`), so every job process built the Realtime events it sends and reads again while its
room waited: py-spy on job processes under load found that building at about 2 % of their busy samples, and
building all of them takes about 0.15 s of CPU on an idle host. livekit-agents' `llm.ChatMessage` is likewise built
on a job's first message.

Three more, found by py-spy on a job process from the job request to the agent listening (about 0.6 s of CPU in
all on an idle host; ten arriving at once on two cores wait for each other's): livekit-agents' hyphenation
patterns, which the transcript pacing builds on a conversation's first words (about 50 ms), and two TLS contexts,
each a whole CA bundle parsed (30-60 ms each): the one livekit-agents builds for the Realtime connection's http
session, and the MCP client's (`agent.mcp.transport.tls_context`). Paired one-person runs, before and after the
patterns and the MCP context alone, alternating: a job process's CPU from the job request to its MCP session
0.73 / 0.57 s before, 0.56 / 0.33 s after.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
from collections.abc import Iterable

import openai.types.realtime as realtime_types
from livekit.agents import llm, tokenize
from livekit.agents.utils import http_context
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


async def _open_http_session() -> None:
    """Open and close one livekit-agents http session: the framework keeps the TLS context it builds for it."""
    async with http_context.open():
        http_context.http_session()


def build_job_caches() -> None:
    """The hyphenation patterns and the Realtime connection's TLS context (livekit-agents keeps both once built),
    and the MCP client's TLS context."""
    tokenize.basic.hyphenate_word("constitución")
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # imported outside any event loop, as the forkserver does: the one place it pays off
        asyncio.run(_open_http_session())
    tls_context()


BUILT = build_realtime_models()
build_job_caches()
