"""The page's copy of the page protocol matches the worker's: topics, versions, message types, reasons, limits.

The page is TypeScript and cannot import the Python vocabulary, so this test reads `web/src/research.ts` and
`web/src/speech.ts` and fails when either side changes alone (the page once lacked the `contract` reason and
showed a generic line).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from agent import contract
from agent.voice import evidence, speech

PAGE = Path("web/src/research.ts")
SPEECH_PAGE = Path("web/src/speech.ts")
AGENT_MESSAGE_PAGE = Path("web/src/agentMessage.ts")


def _page(page: Path = PAGE) -> str:
    return page.read_text(encoding="utf-8")


def _string_array(name: str, page: Path = PAGE) -> list[str]:
    match = re.search(rf"export const {name} = \[(.*?)\] as const;", _page(page), re.S)
    assert match, f"{name} not found in {page}"
    return re.findall(r"'([^']+)'", match.group(1))


def _constant(name: str, page: Path = PAGE) -> str:
    match = re.search(rf"export const {name} = ([^;]+);", _page(page))
    assert match, f"{name} not found in {page}"
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


def test_speech_topic_version_and_types_match_the_publisher() -> None:
    assert _constant("SPEECH_TOPIC", SPEECH_PAGE) == speech.TOPIC != evidence.TOPIC
    assert (
        int(_constant("SPEECH_PROTOCOL_VERSION", SPEECH_PAGE))
        == get_args(speech.Interrupted.model_fields["v"].annotation)[0]
    )
    python_types = [get_args(m.model_fields["type"].annotation)[0] for m in speech.MESSAGES]
    assert _string_array("SPEECH_MESSAGE_TYPES", SPEECH_PAGE) == python_types


def test_speech_messages_carry_no_conversation_text() -> None:
    for message in speech.MESSAGES:
        assert set(message.model_fields) == {"v", "type"}
    assert speech.Interrupted().model_dump_json() == '{"v":1,"type":"interrupted"}'


def test_the_page_takes_speech_messages_only_from_the_agent() -> None:
    parser = re.search(r"export function parseSpeechMessage\((.*?)\n\}", _page(SPEECH_PAGE), re.S)
    assert parser
    assert "if (!isAgentSender(sender)) return null;" in parser.group(1)
    # The rule itself, shared with the research topic (web/src/agentMessage.ts): the sender is the agent participant.
    shared = re.search(r"export function isAgentSender\((.*?)\n\}", _page(AGENT_MESSAGE_PAGE), re.S)
    assert shared
    assert "return sender?.kind === ParticipantKind.AGENT;" in shared.group(1)
