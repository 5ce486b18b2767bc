"""The stand-in's fixed Spanish read-back of search results (the rehearsal-mode template).

Offline and fast: no server, no client.
"""

from __future__ import annotations

import json

from realtime_standin.policy import (
    FAILED_REPLY,
    GREETING,
    NO_SOURCES_REPLY,
    FunctionCallPlan,
    LegalResearchPolicy,
    PolicyContext,
    SpeakPlan,
    render_sources,
)
from tests.standin_helpers import SOURCES


def test_sources_template() -> None:
    text = render_sources(json.dumps({"status": "ok", "sources": SOURCES}))
    assert text == (
        "Modo de ensayo. Encontré 2 fuentes: Constitución Política de Panamá, art. 37; Constitución, art. 41."
    )
    assert render_sources(json.dumps({"sources": []})) == NO_SOURCES_REPLY
    assert render_sources(json.dumps({"status": "failed"})) == FAILED_REPLY
    assert "descartó" in render_sources(json.dumps({"status": "discarded", "sources": SOURCES}))
    assert render_sources("An internal error occurred") == FAILED_REPLY  # failures come back as plain text
    # Lexvoz's own shape
    lexvoz = {"estado": "ok", "aviso": "datos citados", "fuentes": [{"citation": "Constitución, art. 7"}]}
    assert render_sources(json.dumps(lexvoz)) == "Modo de ensayo. Encontré 1 fuente: Constitución, art. 7."
    assert "descartó" in render_sources(json.dumps({"estado": "descartada", "motivo": "otra pregunta"}))
    assert render_sources(json.dumps({"estado": "sin_fuentes", "fuentes": []})) == NO_SOURCES_REPLY


def _context(instructions: str | None, *, user_said: bool = False) -> PolicyContext:
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "¿Hola?"}]}]
    tools = [{"type": "function", "name": "search_panama_law"}]
    params = {} if instructions is None else {"instructions": instructions}
    return PolicyContext(items if user_said else [], tools, "auto", instructions, params)


def test_a_line_asked_for_word_for_word_is_said_as_given() -> None:
    """An instruction-following model says a line it is told to say exactly; the stand-in does that much, so a
    client's fixed line is as long here as with the real model. The plugin sends the session's instructions
    first, then the response's."""
    policy = LegalResearchPolicy()
    said = policy.decide(_context('Eres Lexvoz.\nDi exactamente esta frase, sin añadir nada: "Ya estoy aquí."'))
    assert said == SpeakPlan("Ya estoy aquí.")
    assert policy.decide(_context("Say exactly: «Back again.»", user_said=True)) == SpeakPlan("Back again.")


def test_instructions_without_a_line_to_say_exactly_change_nothing() -> None:
    policy = LegalResearchPolicy()
    assert policy.decide(_context('Saluda brevemente: di "hola" con tus palabras.')) == SpeakPlan(GREETING)
    assert policy.decide(_context(None)) == SpeakPlan(GREETING)
    assert isinstance(policy.decide(_context("Responde exactamente a lo que dijo.", user_said=True)), FunctionCallPlan)
