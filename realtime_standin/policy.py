"""What the stand-in "model" answers, and what its "transcriber" hears.

A response policy looks at the conversation and decides one output: speak a text, or call a
function. The default, :class:`LegalResearchPolicy`, is the scripted behaviour of Lexvoz's
rehearsal mode: greet, research the user's latest question with ``search_panama_law``, then
read back the sources from the tool result in a fixed Spanish template. It is deterministic so
tests can assert on it, and it never invents legal content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

JsonDict = dict[str, Any]

GREETING = "Hola, soy Lexvoz en modo de ensayo. ¿Qué quiere consultar sobre la Constitución de Panamá?"
NO_TOOL_REPLY = "Modo de ensayo. No tengo la herramienta de búsqueda disponible para responder."
FOLLOW_UP_REPLY = "Modo de ensayo. ¿Desea consultar algo más sobre la Constitución de Panamá?"
PENDING_CALL_REPLY = "Modo de ensayo. Sigo esperando el resultado de la búsqueda."
NO_SOURCES_REPLY = "Modo de ensayo. No encontré fuentes para esa consulta."
FAILED_REPLY = "Modo de ensayo. La búsqueda no se pudo completar, así que no tengo fuentes que citar."
DISCARDED_REPLY = "Modo de ensayo. La búsqueda se descartó, así que no tengo fuentes que citar."

DEFAULT_TOOL_NAME = "search_panama_law"
# A response's own instructions asking for a line word for word ("Di exactamente ...: "<line>"", "Say exactly:
# "<line>""), which an instruction-following model says as given. The stand-in cannot follow free instructions,
# but it can follow this one, so a client's fixed line sounds as long as it would with the real model.
VERBATIM = re.compile(r"\b(?:di|dí|say)\s+exact(?:amente|ly)\b[^\"«]*[\"«]([^\"»]{1,500})[\"»]", re.IGNORECASE)
DEFAULT_FALLBACK_TRANSCRIPT = "¿Qué dice la Constitución sobre la libertad de expresión?"


# ---------------------------------------------------------------------------------------------
# transcripts


class TranscriptProvider(Protocol):
    """Turns a committed user audio turn into text (the stand-in has no speech recognition)."""

    def transcribe(self, audio: bytes, duration_ms: int) -> str: ...


class ScriptedTranscripts:
    """Hands out configured transcripts in order, then a fixed fallback text forever."""

    def __init__(self, transcripts: Iterable[str] = (), fallback: str = DEFAULT_FALLBACK_TRANSCRIPT) -> None:
        self._queue = list(transcripts)
        self.fallback = fallback

    def push(self, *transcripts: str) -> None:
        self._queue.extend(transcripts)

    def transcribe(self, audio: bytes, duration_ms: int) -> str:
        return self._queue.pop(0) if self._queue else self.fallback


# ---------------------------------------------------------------------------------------------
# plans


@dataclass(frozen=True)
class SpeakPlan:
    text: str


@dataclass(frozen=True)
class FunctionCallPlan:
    name: str
    arguments: str
    call_id: str | None = None
    delay_s: float = 0.0


Plan = SpeakPlan | FunctionCallPlan


@dataclass
class ScriptedCall:
    """Overrides for the next function call the policy emits (test knob)."""

    arguments: str | None = None
    call_id: str | None = None
    name: str | None = None
    delay_s: float = 0.0


@dataclass
class PolicyContext:
    """What a policy may look at: the conversation, the tools offered and the request."""

    items: Sequence[JsonDict]
    tools: Sequence[JsonDict]
    tool_choice: Any
    instructions: str | None
    response_params: JsonDict = field(default_factory=dict)


class ResponsePolicy(Protocol):
    def decide(self, ctx: PolicyContext) -> Plan: ...


def message_text(item: JsonDict) -> str:
    """The text of a message item: typed text, or the transcript of its audio."""
    parts: list[str] = []
    for part in item.get("content") or []:
        if not isinstance(part, dict):
            continue
        text = part.get("text") if part.get("type") in ("input_text", "output_text", "text") else None
        if text is None and part.get("type") in ("input_audio", "output_audio", "audio"):
            text = part.get("transcript")
        if text:
            parts.append(str(text))
    return " ".join(parts).strip()


class LegalResearchPolicy:
    """Greeting → function call with the user's words → templated read-back of the sources."""

    def __init__(self, tool_name: str = DEFAULT_TOOL_NAME) -> None:
        self.tool_name = tool_name
        self._scripted: list[ScriptedCall] = []
        self.function_call_delay_s = 0.0

    def script_function_call(self, call: ScriptedCall) -> None:
        self._scripted.append(call)

    def decide(self, ctx: PolicyContext) -> Plan:
        line = verbatim_line(ctx.response_params.get("instructions"))
        if line is not None:
            return SpeakPlan(line)
        relevant = [
            i
            for i in ctx.items
            if i.get("type") in ("function_call", "function_call_output")
            or (i.get("type") == "message" and i.get("role") in ("user", "assistant"))
        ]
        has_user_message = any(i.get("type") == "message" and i.get("role") == "user" for i in relevant)
        if not relevant or not has_user_message:
            return SpeakPlan(GREETING)
        last = relevant[-1]
        if last["type"] == "function_call_output":
            return SpeakPlan(render_sources(last.get("output")))
        if last["type"] == "function_call":
            return SpeakPlan(PENDING_CALL_REPLY)
        if last.get("role") == "assistant":
            return SpeakPlan(FOLLOW_UP_REPLY)
        # the latest thing said is an unanswered user message
        query = message_text(last)
        if not self._tool_offered(ctx):
            return SpeakPlan(NO_TOOL_REPLY)
        scripted = self._scripted.pop(0) if self._scripted else ScriptedCall()
        arguments = scripted.arguments
        if arguments is None:
            arguments = json.dumps({"query": query}, ensure_ascii=False)
        return FunctionCallPlan(
            name=scripted.name or self.tool_name,
            arguments=arguments,
            call_id=scripted.call_id,
            delay_s=scripted.delay_s or self.function_call_delay_s,
        )

    def _tool_offered(self, ctx: PolicyContext) -> bool:
        if ctx.tool_choice == "none":
            return False
        return any(isinstance(t, dict) and t.get("name") == self.tool_name for t in ctx.tools)


def verbatim_line(instructions: Any) -> str | None:
    """The line a response's instructions ask to be said word for word, if they ask for one."""
    if not isinstance(instructions, str):
        return None
    match = VERBATIM.search(instructions)
    return match.group(1).strip() if match else None


def render_sources(output: Any) -> str:
    """The fixed Spanish read-back of a ``search_panama_law`` result.

    Lexvoz's tool answers with JSON (``estado`` + ``fuentes``, each source with a ``citation``) and
    reports failures as plain text; generic variants (``status``/``sources``/``results``) are read
    too, so the stand-in also serves other tools. Never guesses at content.
    """
    data: Any = output
    if isinstance(output, str):
        try:
            data = json.loads(output)
        except ValueError:
            return FAILED_REPLY  # a failed tool answers with a plain-text error
    if isinstance(data, list):
        data = {"sources": data}
    if not isinstance(data, dict):
        return NO_SOURCES_REPLY
    status = str(data.get("estado") or data.get("status") or "").lower()
    if status in ("descartada", "discarded", "cancelled", "canceled", "stale"):
        return DISCARDED_REPLY
    if status in ("failed", "error", "timeout", "unavailable") or data.get("ok") is False or data.get("error"):
        return FAILED_REPLY
    sources = next((data[k] for k in ("fuentes", "sources", "results") if data.get(k) is not None), None)
    citations = [c for c in (_citation(s) for s in sources or []) if c]
    if not citations:
        return NO_SOURCES_REPLY
    noun = "fuente" if len(citations) == 1 else "fuentes"
    return f"Modo de ensayo. Encontré {len(citations)} {noun}: {'; '.join(citations)}."


def _citation(source: Any) -> str:
    if isinstance(source, str):
        return source.strip()
    if isinstance(source, dict):
        for key in ("citation", "cita", "reference", "title", "article", "articulo", "id"):
            value = source.get(key)
            if value:
                return str(value).strip()
    return ""
