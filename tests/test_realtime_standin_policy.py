"""The stand-in's fixed Spanish read-back of search results (the rehearsal-mode template).

Offline and fast: no server, no client.
"""

from __future__ import annotations

import json

from realtime_standin.policy import FAILED_REPLY, NO_SOURCES_REPLY, render_sources
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
