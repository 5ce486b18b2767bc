"""The citation check on the agent's words while it speaks: sentence by sentence, published, counted, kept.

The realtime model's transcript reaches the framework as a stream of text pieces; `SpokenCitations.observe`
sits on that stream (the agent's `transcription_node`), hands every piece on at once and unchanged, and
checks each sentence once it is complete (and what is left when the message ends) against the sources
delivered to the model in this conversation (`CitationCheck`). Each citation found goes to the room as a
`citation_checked` research message and to the observers (the metric, the ledger); the same citation is
checked once per user turn, so a retraction that names it again is not a second finding.

A sentence waits for its end because a citation is split across pieces ("el artículo setenta" ... "y cuatro
de la Constitución"): checked early, it would be half a number. Publishing never holds the stream up: the
messages go out from background tasks, in order.

When a turn holds an unverified citation, `take_correction` gives it, once per turn, to the agent, which asks
the model to retract it or search for it. The correction's own words are in the same turn, so they can never
ask for another one.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import TypeVar

from agent.voice.citations import CheckedCitation, Citation, CitationCheck
from agent.voice.evidence import CitationChecked, EvidencePublisher
from agent.voice.norm_names import CONSTITUTION
from agent.voice.turns import TurnCounter

logger = logging.getLogger("lexvoz.spoken")

S = TypeVar("S", bound=str)

# A sentence ends at . ! ? … (or ; :) followed by a space, unless the period closes an abbreviation a citation
# uses ("art. 74", "Ley No. 6", "num. 3") or a single letter ("inciso a. ").
_END = re.compile(r"[.!?…;:]+[\"»”')\]]*\s")
_ABBREVIATION = re.compile(
    r"(?:\b(?:arts?|n[oº°]|nos|n[uú]m|nums|inc|incs|lit|ord|pág|pag|cap|tít|tit|sr|sra|dr|dra)|\b[^\W\d_])\.$", re.I
)
# Past this many characters without an end, the buffer is checked anyway (a model that never punctuates).
_MAX_SENTENCE_CHARS = 600

CORRECTION_NOTICE = "Aviso de verificación"
"""The first words of the correction instruction (a scripted model in the evals recognises it)."""


@dataclass(frozen=True, slots=True)
class CitationEvent:
    """One citation the agent spoke, as observers receive it: no spoken words, only what was cited."""

    turn: int
    article: str
    norm: str | None
    verified: bool


class SentenceBuffer:
    """Collects text pieces and gives back each complete sentence once."""

    def __init__(self) -> None:
        self._text = ""

    def feed(self, piece: str) -> list[str]:
        self._text += piece
        out: list[str] = []
        start = 0
        for m in _END.finditer(self._text):
            if m.group(0)[0] == "." and _ABBREVIATION.search(self._text[start : m.start() + 1]):
                continue
            out.append(self._text[start : m.end()].strip())
            start = m.end()
        self._text = self._text[start:]
        if len(self._text) > _MAX_SENTENCE_CHARS:
            out.append(self._text.strip())
            self._text = ""
        return [s for s in out if s]

    def flush(self) -> str:
        rest, self._text = self._text.strip(), ""
        return rest


class SpokenCitations:
    """One conversation's check of what the agent says; never raises into the speech."""

    def __init__(
        self,
        check: CitationCheck,
        publisher: EvidencePublisher,
        turns: TurnCounter,
        *,
        observers: list[Callable[[CitationEvent], None]] | None = None,
    ) -> None:
        self.check = check
        self._publisher = publisher
        self._turns = turns
        self._observers = list(observers or [])
        self._turn = -1
        self._seen: set[tuple[str | None, str]] = set()
        self._unverified: list[Citation] = []
        self._corrected_turn = -1

    async def observe(self, text: AsyncIterable[S]) -> AsyncIterator[S]:
        """Every piece of `text`, unchanged and undelayed; each complete sentence is checked after it passed."""
        buffer = SentenceBuffer()
        async for piece in text:
            yield piece
            for sentence in buffer.feed(str(piece)):
                self.check_sentence(sentence)
        rest = buffer.flush()
        if rest:
            self.check_sentence(rest)

    def check_sentence(self, sentence: str) -> list[CheckedCitation]:
        """Check one sentence; publish and observe each citation not yet checked in this turn."""
        try:
            return self._check_sentence(sentence)
        except Exception:  # a checking bug must never cut the agent's speech
            logger.exception("citation check failed")
            return []

    def _check_sentence(self, sentence: str) -> list[CheckedCitation]:
        turn = self._turns.current
        if turn != self._turn:
            self._turn, self._seen, self._unverified = turn, set(), []
        found: list[CheckedCitation] = []
        for checked in self.check.check(sentence):
            c = checked.citation
            if (c.norm, c.article) in self._seen:
                continue
            self._seen.add((c.norm, c.article))
            found.append(checked)
            if not checked.verified:
                self._unverified.append(c)
            self._send(
                CitationChecked(
                    turn=turn,
                    said=c.said[:300],
                    article=c.article,
                    norm=c.norm,
                    verified=checked.verified,
                    source=checked.source,
                    call_id=checked.call_id,
                )
            )
            self._notify(CitationEvent(turn, c.article, c.norm, checked.verified))
        return found

    def take_correction(self) -> list[Citation]:
        """The unverified citations of the current turn, once per turn (then never again in that turn)."""
        turn = self._turns.current
        if turn != self._turn or not self._unverified or self._corrected_turn == turn:
            return []
        self._corrected_turn = turn
        return list(self._unverified)

    def _send(self, message: CitationChecked) -> None:
        # Queued behind the evidence already posted, so the page has the card before the check that names it.
        self._publisher.post(message)

    async def drain(self) -> None:
        """Wait until every message checked so far has been handed to the room (tests, shutdown)."""
        await self._publisher.drain()

    def _notify(self, event: CitationEvent) -> None:
        for observer in self._observers:
            try:
                observer(event)
            except Exception:  # an observer must never break a conversation
                logger.exception("citation observer failed")


def spoken_name(citation: Citation) -> str:
    """A citation as the correction names it to the model: "el artículo 14 de la Ley 200 de 2031"."""
    article = f"el artículo {citation.article}"
    if citation.norm is None:
        return article
    if citation.norm == CONSTITUTION:
        return f"{article} de la Constitución"
    return f"{article} de la {citation.norm[:1].upper()}{citation.norm[1:]}"


def correction_instructions(unverified: list[Citation]) -> str:
    """What the model is told after it spoke citations the evidence did not hold (Spanish: it speaks next)."""
    names = "; ".join(dict.fromkeys(spoken_name(c) for c in unverified))
    return (
        f"{CORRECTION_NOTICE}: en tu última respuesta citaste {names}, y eso no está entre las fuentes que "
        "la búsqueda te entregó en esta conversación. En una o dos frases breves, dile al usuario que retiras "
        "esa cita porque no la pudiste verificar; si hace falta para responder, llama a search_panama_law para "
        "buscarla antes de afirmar nada. No la vuelvas a presentar como verificada."
    )
