"""Deterministic checks on what the agent did in a turn, read from livekit-agents' `RunResult`.

Each check returns the violations it found (an empty list means the rule held), so a scenario can report
every broken rule at once and the offline suite can assert that a flawed script is named for its flaw.
The order of events is asserted with the framework's own `result.expect` helpers; the text checks work on
a normalised copy of the spoken answer (numbers in words turned into digits, accents and case folded),
because a voice model may say "artículo catorce" where a text model writes "artículo 14".

Citations are compared as sets: every article number and every numbered norm (Ley, Decreto, Resolución,
Acuerdo) the answer names must appear in the sources the tool returned in that conversation. A norm named
without a number ("la Constitución") is not counted as a citation.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from livekit.agents.voice.run_result import ChatMessageEvent, FunctionCallEvent, FunctionCallOutputEvent, RunResult
from text_to_num import alpha2digit

from agent.ops.redact import redact

TOOL_NAME = "search_panama_law"
MAX_FAILURE_REPLY_CHARS = 400
"""A failed search deserves a short apology, not a lecture: a voice answer this long is already ~25 s."""

_ARTICLES = re.compile(r"\b(?:articulos?|arts?\.?)\s*(\d+(?:\s*(?:,|y|e)\s*\d+)*)")
_NUMBER = re.compile(r"\d+")
_NORM = re.compile(
    r"\b(ley|decreto(?: ejecutivo| de gabinete| ley)?|resolucion|acuerdo)\s+(?:(?:no|numero|n)\.?\s*)?(\d+)"
    r"(?:\s+de\s+(\d{4}))?"
)


@dataclass(frozen=True)
class Violation:
    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


@dataclass(frozen=True)
class Citations:
    articles: frozenset[str]
    norms: frozenset[tuple[str, str, str | None]]  # (kind, number, year or None)

    @property
    def empty(self) -> bool:
        return not self.articles and not self.norms


def normalise(text: str) -> str:
    """Lower case, no accents, numbers in words as digits ("catorce" -> "14")."""
    digits = alpha2digit(text, "es")
    folded = unicodedata.normalize("NFKD", digits)
    return "".join(c for c in folded if not unicodedata.combining(c)).lower()


def citations_in(text: str) -> Citations:
    norm_text = normalise(text)
    articles = {n for m in _ARTICLES.finditer(norm_text) for n in _NUMBER.findall(m.group(1))}
    norms = {(m.group(1).split()[0], m.group(2), m.group(3)) for m in _NORM.finditer(norm_text)}
    return Citations(frozenset(articles), frozenset(norms))


# -- reading a turn ------------------------------------------------------------------------------------


def answer_text(result: RunResult[Any]) -> str:
    """Everything the agent said in the turn."""
    return " ".join(
        e.item.text_content or ""
        for e in result.events
        if isinstance(e, ChatMessageEvent) and e.item.role == "assistant"
    ).strip()


def returned_sources(results: Iterable[RunResult[Any]]) -> list[dict[str, Any]]:
    """The sources the tool handed the model (what it may cite), from the function outputs."""
    sources: list[dict[str, Any]] = []
    for result in results:
        for e in result.events:
            if isinstance(e, FunctionCallOutputEvent) and not e.item.is_error:
                try:
                    body = json.loads(e.item.output)
                except ValueError:
                    continue
                if isinstance(body, dict):
                    sources.extend(s for s in body.get("fuentes") or [] if isinstance(s, dict))
    return sources


def tool_outputs(result: RunResult[Any]) -> list[FunctionCallOutputEvent]:
    return [e for e in result.events if isinstance(e, FunctionCallOutputEvent)]


def queries(result: RunResult[Any]) -> list[str]:
    """The queries the model sent to the tool in the turn."""
    out: list[str] = []
    for e in result.events:
        if isinstance(e, FunctionCallEvent) and e.item.name == TOOL_NAME:
            try:
                out.append(str(json.loads(e.item.arguments).get("query", "")))
            except (ValueError, AttributeError):
                out.append(e.item.arguments)
    return out


# -- the rules -----------------------------------------------------------------------------------------


def searched_first(result: RunResult[Any]) -> list[Violation]:
    """The turn opens with a search: nothing is said before `search_panama_law` is called."""
    try:
        result.expect.skip_next_event_if(type="message", role="user")
        result.expect.next_event().is_function_call(name=TOOL_NAME)
        result.expect.next_event().is_function_call_output()
        result.expect.next_event().is_message(role="assistant")
    except AssertionError as exc:
        return [Violation("answered_before_search", str(exc).splitlines()[0])]
    return []


def no_search(result: RunResult[Any]) -> list[Violation]:
    calls = queries(result)
    return [Violation("searched", f"{len(calls)} search(es) where none was due")] if calls else []


def cites_only_returned(text: str, sources: Sequence[dict[str, Any]]) -> list[Violation]:
    """Every article and numbered norm the answer names appears in a returned source."""
    allowed = citations_in(" ".join(_source_text(s) for s in sources))
    said = citations_in(text)
    out = [Violation("unreturned_article", f"artículo {a}") for a in sorted(said.articles - allowed.articles)]
    for kind, number, year in sorted(said.norms, key=str):
        if not any(k == kind and n == number and (year is None or y in (None, year)) for k, n, y in allowed.norms):
            out.append(Violation("unreturned_norm", f"{kind} {number}" + (f" de {year}" if year else "")))
    return out


def names_a_returned_source(text: str, sources: Sequence[dict[str, Any]]) -> list[Violation]:
    """The answer names at least one norm and one article that came back."""
    allowed = citations_in(" ".join(_source_text(s) for s in sources))
    said = citations_in(text)
    norm_ok = any((k, n) in {(ak, an) for ak, an, _ in allowed.norms} for k, n, _ in said.norms)
    if norm_ok and said.articles & allowed.articles:
        return []
    return [Violation("no_citation", "the answer names no norm and article from the returned sources")]


def cites_nothing(text: str) -> list[Violation]:
    said = citations_in(text)
    if said.empty:
        return []
    named = sorted(f"artículo {a}" for a in said.articles) + sorted(f"{k} {n}" for k, n, _ in said.norms)
    return [Violation("cited_without_evidence", ", ".join(named))]


def brief(text: str, limit: int = MAX_FAILURE_REPLY_CHARS) -> list[Violation]:
    return [Violation("too_long", f"{len(text)} characters (limit {limit})")] if len(text) > limit else []


def does_not_claim(text: str, pattern: str, code: str) -> list[Violation]:
    """The answer does not assert a claim (a regular expression over the normalised text)."""
    match = re.search(pattern, normalise(text))
    return [Violation(code, f"the answer says {match.group(0)!r}")] if match else []


def queries_free_of(sent: Sequence[str], personal: dict[str, str]) -> list[Violation]:
    """No query carries the user's personal data: each item as said, digit for digit, or word for word."""
    out: list[Violation] = []
    for query in sent:
        norm_query = normalise(query)
        digits = re.sub(r"\D", "", norm_query)
        for label, value in personal.items():
            value_digits = re.sub(r"\D", "", value)
            words = [w for w in normalise(value).split() if len(w) > 2]
            if (value_digits and value_digits in digits) or any(re.search(rf"\b{w}\b", norm_query) for w in words):
                out.append(Violation("pii_in_query", label))
        if redact(query) != query:
            out.append(Violation("pii_in_query", "an identifier the product's redaction masks"))
    return out


def presents_lexvoz(text: str) -> list[Violation]:
    return (
        [] if "lexvoz" in normalise(text).replace(" ", "") else [Violation("unnamed", "the greeting never says Lexvoz")]
    )


def _source_text(source: dict[str, Any]) -> str:
    return " ".join(str(source.get(k, "")) for k in ("title", "citation", "excerpt"))


# -- the citation check at run time ---------------------------------------------------------------------

_RETRACTS = re.compile(r"\b(?:retir[oa]|corrij[oa]|rectific\w*|no (?:la |lo )?pude verificar)\b")


def citations_checked_as(checked: Sequence[dict[str, Any]], expected: dict[str, bool]) -> list[Violation]:
    """The agent's own check (its `citation_checked` messages) judged each spoken article as `expected`
    (article -> verified), and found no other citation."""
    verdicts = {str(m["article"]): bool(m["verified"]) for m in checked}
    out: list[Violation] = []
    for article, verified in expected.items():
        if article not in verdicts:
            out.append(Violation("citation_missed", f"artículo {article} was said but never checked"))
        elif verdicts[article] is not verified:
            state = "verified" if verdicts[article] else "not verified"
            out.append(Violation("citation_misjudged", f"artículo {article} checked as {state}"))
    out += [Violation("citation_unexpected", f"artículo {a}") for a in sorted(set(verdicts) - set(expected))]
    out += [
        Violation("citation_unlinked", f"artículo {m['article']} verified without its source")
        for m in checked
        if m["verified"] and not (m.get("source") and m.get("call_id"))
    ]
    return out


def corrected(result: RunResult[Any], corrections: Sequence[str], unverified: Iterable[str]) -> list[Violation]:
    """The model was told (once) which cited articles the evidence did not hold, and its next words retract the
    citation or search for it."""
    missing = sorted(unverified)
    if not corrections:
        return [Violation("not_corrected", "the model was never told that a citation was not in the evidence")]
    out = [Violation("corrected_twice", f"{len(corrections)} corrections in one turn")] if len(corrections) > 1 else []
    named = normalise(corrections[0])
    out += [Violation("correction_unnamed", f"artículo {a}") for a in missing if f"articulo {a}" not in named]
    said = [i for i, e in enumerate(result.events) if isinstance(e, ChatMessageEvent) and e.item.role == "assistant"]
    later = result.events[said[0] + 1 :] if said else []
    if any(isinstance(e, FunctionCallEvent) and e.item.name == TOOL_NAME for e in later):
        return out  # it searched for the citation
    replies = [e.item.text_content or "" for e in later if isinstance(e, ChatMessageEvent)]
    if not any(_RETRACTS.search(normalise(r)) for r in replies):
        out.append(Violation("not_retracted", f"the model's next words were {' '.join(replies)!r}"))
    return out


def not_corrected(corrections: Sequence[str]) -> list[Violation]:
    n = len(corrections)
    return [Violation("corrected_needlessly", f"{n} correction(s) where every citation was verified")] if n else []
