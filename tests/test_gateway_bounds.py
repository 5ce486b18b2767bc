"""Result bounds before work: early stop at three valid sources, hidden characters, link rules."""

from __future__ import annotations

from typing import Any

import pytest

from agent.contract import Source, validate_results
from tests.mcp_fixture import synthetic_source


def test_validation_stops_once_three_valid_sources_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    original = Source.model_validate

    def counting(obj: Any, *args: Any, **kwargs: Any) -> Source:
        nonlocal calls
        calls += 1
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(Source, "model_validate", counting)
    out = validate_results({"results": [synthetic_source(i % 50) for i in range(200_000)]})
    assert len(out.sources) == 3
    assert calls == 3
    assert out.truncated == 200_000 - 3


@pytest.mark.parametrize("bad", ["\u202e", "\u2066", "\u200f", "\x1b", "\x00", "\x07"])
def test_required_field_with_control_or_bidi_characters_drops_the_source(bad: str) -> None:
    out = validate_results({"results": [synthetic_source(1, title=f"Ley{bad}1"), synthetic_source(2)]})
    assert [s.citation for s in out.sources] == [synthetic_source(2)["citation"]]
    assert out.drop_reasons and "title" in out.drop_reasons[0]
    assert f"U+{ord(bad):04X}" in out.drop_reasons[0]


def test_optional_field_with_hidden_characters_is_dropped_and_the_source_kept() -> None:
    out = validate_results({"results": [synthetic_source(1, gaceta="G\u202e-1", date="2004\x07")]})
    assert out.sources[0].public_dict() == synthetic_source(1)


def test_excerpt_line_breaks_are_not_control_characters() -> None:
    out = validate_results({"results": [synthetic_source(1, excerpt="uno\ndos\tTres")]})
    assert out.sources[0].excerpt == "uno\ndos\tTres"


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example\\x.gacetaoficial.gob.pa/",
        "https://evil.example\\@gacetaoficial.gob.pa/",
        "https://gacetaoficial.gob.pa:99999/x",
        "https://gacetaoficial.gob.pa:0/x",
        "https://gacetaoficial.gob.pa:abc/x",
        "https://a@gacetaoficial.gob.pa/x",
        "https://gaceta oficial.gob.pa/x",
    ],
)
def test_unsafe_links_drop_the_source(url: str) -> None:
    out = validate_results({"results": [synthetic_source(1, official_source_url=url), synthetic_source(2)]})
    assert [s.citation for s in out.sources] == [synthetic_source(2)["citation"]]
    assert out.drop_reasons[0].startswith("source 1: official_source_url")


def test_look_alike_unicode_host_is_shown_in_its_idna_form() -> None:
    lookalike = "https://gaceta\u043eficial.gob.pa/x"  # Cyrillic o
    out = validate_results({"results": [synthetic_source(1, official_source_url=lookalike)]})
    assert out.sources[0].official_source_url == "https://xn--gacetaficial-9fk.gob.pa/x"


def test_host_case_and_port_are_normalised() -> None:
    out = validate_results({"results": [synthetic_source(1, official_source_url="HTTPS://Gaceta.GOB.pa:8443/A")]})
    assert out.sources[0].official_source_url == "https://gaceta.gob.pa:8443/A"
