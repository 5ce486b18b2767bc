"""The page's copy of the page protocol matches the worker's: topics, versions, message types, reasons, limits.

The page is TypeScript and cannot import the Python vocabulary, so this test reads `web/src/research.ts` and
`web/src/speech.ts` (and, for the one message the page sends, `web/src/pageHello.ts`) and fails when either side
changes alone (the page once lacked the `contract` reason and showed a generic line).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from pydantic.fields import FieldInfo

from agent import contract
from agent.voice import citations, evidence, page_hello, speech

PAGE = Path("web/src/research.ts")
CITATIONS_PAGE = Path("web/src/citations.ts")
SPEECH_PAGE = Path("web/src/speech.ts")
AGENT_MESSAGE_PAGE = Path("web/src/agentMessage.ts")
HELLO_PAGE = Path("web/src/pageHello.ts")


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
    # A member may be written over several lines, with its fields' comments.
    page_types = set(re.findall(r"\{\s*type: '(\w+)';\s*(?:/\*\*.*?\*/\s*)?callId", _page(), re.S))
    assert page_types == python_types


def _limits() -> dict[str, int]:
    block = re.search(r"const LIMITS = \{(.*?)\} as const;", _page(), re.S)
    assert block
    return {k: int(v.replace("_", "")) for k, v in re.findall(r"(\w+): ([\d_]+)", block.group(1))}


def test_field_limits_match_the_contract() -> None:
    limits = _limits()
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


def _max_length(field: FieldInfo) -> int:
    """The `max_length` of a `str` field: on the field itself, or inside its `Annotated[...] | None`."""
    constraints = list(field.metadata)
    for arg in get_args(field.annotation):
        for meta in getattr(arg, "__metadata__", ()):
            constraints.extend(getattr(meta, "metadata", ()))
    lengths = [c.max_length for c in constraints if hasattr(c, "max_length")]
    assert len(lengths) == 1, f"no single max_length on {field}"
    return lengths[0]


def test_citation_checked_fields_are_the_ones_the_page_reads() -> None:
    parser = re.search(r"function parseCitationChecked\((.*?)\n\}", _page(), re.S)
    assert parser
    read = set(re.findall(r"data\.(\w+)", parser.group(1))) | set(re.findall(r"data, '(\w+)'", parser.group(1)))
    assert read == set(evidence.CitationChecked.model_fields) - {"v", "type"}
    # The page's message carries each of them (call_id as callId), and nothing the worker does not send.
    member = re.search(r"\| \{\s*type: 'citation_checked';(.*?)\};", _page(), re.S)
    assert member
    page_fields = set(re.findall(r"^\s*(\w+): ", member.group(1), re.M))
    assert page_fields == {"callId", "turn", "said", "article", "norm", "verified", "source"}


def test_citation_checked_limits_match_the_publisher() -> None:
    fields = evidence.CitationChecked.model_fields
    limits = _limits()
    assert limits["said"] == _max_length(fields["said"])
    assert limits["article"] == _max_length(fields["article"])
    assert limits["norm"] == _max_length(fields["norm"])
    # `source` is a source's citation, shown as on its card: the card's limit.
    assert limits["citation"] == _max_length(fields["source"])


def test_citation_norm_keys_are_the_ones_the_worker_writes() -> None:
    """The page names the norm in Spanish from the worker's key: "constitucion", "ley 6 de 2002"."""
    assert _constant("CONSTITUTION_NORM", CITATIONS_PAGE) == citations.CONSTITUTION
    law = re.search(r"export const LAW_NORM = /(.*?)/;", _page(CITATIONS_PAGE))
    assert law
    key = citations.norm_key("Ley 6 de 2002")
    assert key is not None
    assert re.fullmatch(law.group(1), key)
    assert re.fullmatch(law.group(1), citations.CONSTITUTION) is None


def test_the_pages_hello_is_the_message_the_agent_reads() -> None:
    """The one message the page sends the agent: its topic and fields, each side's own copy."""
    assert _constant("PAGE_TOPIC", HELLO_PAGE) == page_hello.TOPIC
    block = re.search(r"export interface PageHello \{(.*?)\}", _page(HELLO_PAGE), re.S)
    assert block
    page_fields = dict(re.findall(r"^\s*(\w+): ([^;]+);", block.group(1), re.M))
    assert set(page_fields) == set(page_hello.Hello.model_fields)
    assert page_fields["v"] == str(get_args(page_hello.Hello.model_fields["v"].annotation)[0])
    assert page_fields["type"] == f"'{get_args(page_hello.Hello.model_fields['type'].annotation)[0]}'"
    assert page_fields["resumed"] == "boolean"
    # what the page writes stays far under the agent's limit
    assert len(b'{"v":1,"type":"hello","resumed":false}') * 4 < page_hello.MAX_HELLO_BYTES
