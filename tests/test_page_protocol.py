"""The page's copy of the research protocol matches the worker's: topic, version, message types, reasons, limits.

The page is TypeScript and cannot import the Python vocabulary, so this test reads `web/src/research.ts` and
fails when either side changes alone (the page once lacked the `contract` reason and showed a generic line).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from agent import contract
from agent.voice import evidence

PAGE = Path("web/src/research.ts")


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def _string_array(name: str) -> list[str]:
    match = re.search(rf"export const {name} = \[(.*?)\] as const;", _page(), re.S)
    assert match, f"{name} not found in {PAGE}"
    return re.findall(r"'([^']+)'", match.group(1))


def _constant(name: str) -> str:
    match = re.search(rf"export const {name} = ([^;]+);", _page())
    assert match, f"{name} not found in {PAGE}"
    return match.group(1).strip().strip("'")


def test_failure_reasons_are_the_contracts_in_its_order() -> None:
    assert _string_array("FAILURE_REASONS") == list(contract.FAILURE_REASONS)


def test_every_failure_reason_has_its_own_spanish_text() -> None:
    block = re.search(r"FAILURE_TEXT: Record<FailureReason, string> = \{(.*?)\};", _page(), re.S)
    assert block
    keys = re.findall(r"^\s*(\w+):", block.group(1), re.M)
    assert sorted(keys) == sorted(contract.FAILURE_REASONS)


def test_topic_and_version_match_the_publisher() -> None:
    assert _constant("RESEARCH_TOPIC") == evidence.TOPIC
    assert int(_constant("PROTOCOL_VERSION")) == get_args(evidence.Started.model_fields["v"].annotation)[0]


def test_message_types_match_the_publishers_models() -> None:
    python_types = {get_args(m.model_fields["type"].annotation)[0] for m in get_args(evidence.ResearchMessage)}
    page_types = set(re.findall(r"\{ type: '(\w+)'; callId", _page()))
    assert page_types == python_types


def test_field_limits_match_the_contract() -> None:
    block = re.search(r"const LIMITS = \{(.*?)\} as const;", _page(), re.S)
    assert block
    limits = {k: int(v.replace("_", "")) for k, v in re.findall(r"(\w+): ([\d_]+)", block.group(1))}
    assert limits["query"] == contract.MAX_QUERY_CHARS
    assert limits["title"] == contract.MAX_TITLE_CHARS
    assert limits["citation"] == contract.MAX_CITATION_CHARS
    assert limits["excerpt"] == contract.MAX_EXCERPT_CHARS
    assert limits["meta"] == contract.MAX_META_CHARS
    assert limits["url"] == contract.MAX_URL_CHARS
