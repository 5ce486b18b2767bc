"""Callers' glosses written by an OpenAI text model at import (`import --write-glosses`).

Glosses lift a team's own law in search as much as they lift the Constitution (`panama_law.ingest.glosses`), but nobody
writes 4-8 of them by hand for every article of a code. This asks the operator's model for them, one article at a
time, with a structured reply (a pydantic model as the response format), and hands the team the result as the
worksheet `import --glosses` reads, so the glosses can be read, edited and imported again.

Paying for the same article twice is what an operator notices first, so every reply is appended to a cache in the
data dir (`gloss_cache.jsonl`, flushed and fsynced line by line) keyed by the article's text, the prompt version
and the model: a re-import pays only for edited articles, and a run stopped by Ctrl-C or a failure resumes where
it stopped. Rate limits and transient failures are retried with backoff (honouring Retry-After); a refused key or
an exhausted quota stops at once with one line, before anything is imported.

What is asked and what it costs live here; the requests themselves (several at once, retried, cached as they
arrive) in `gloss_requests`.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ..norms import Article
from . import glosses
from .gloss_store import GlossCache

if TYPE_CHECKING:
    from openai import OpenAI

log = logging.getLogger(__name__)

PROMPT_VERSION = "1"
"""Part of every cache key: a changed prompt writes new glosses rather than reusing the old prompt's."""
CHARS_PER_TOKEN = 4.0
"""Spanish legal text runs about four characters per token: enough for an estimate, which is all it claims."""
OUTPUT_TOKENS_PER_ARTICLE = 350
"""About 6-8 short glosses and the JSON around them."""

SYSTEM_PROMPT = """\
Escribes "glosas" para un buscador de leyes panameñas que atiende a personas comunes por voz. Una glosa es lo que \
diría alguien que necesita este artículo sin conocerlo: nunca se muestra, solo ayuda a encontrar el artículo.

Para el artículo que te dan, escribe en español de Panamá, en minúsculas, sin signos de puntuación ni tildes \
obligatorias, como se transcribe el habla:
- preguntas: 1 a 3 preguntas cotidianas que este artículo responde, con palabras de la calle.
- situaciones: 2 a 3 situaciones en primera persona ("a mi me...", "mi vecino...") de quien tiene el problema \
que el artículo resuelve; nunca nombres el concepto jurídico ni cites la ley o el artículo.
- sinonimos: 1 a 2 frases que digan el asunto con sinónimos comunes, no con los términos del artículo.

Cada glosa tiene menos de 200 caracteres. No inventes lo que el artículo no dice. Usa voces distintas: \
jóvenes, mayores, trabajadores, dueños de negocio, vecinos."""


class ArticleGlosses(BaseModel):
    """The reply's shape: three kinds of callers' wording, as the shipped glosses mix them."""

    preguntas: list[str]
    situaciones: list[str]
    sinonimos: list[str]

    def texts(self) -> tuple[str, ...]:
        """Non-empty, within the import limits (`glosses.check`), in the order a worksheet shows them."""
        seen: dict[str, None] = {}
        for text in (*self.preguntas, *self.situaciones, *self.sinonimos):
            clean = " ".join(text.split())
            if clean and len(clean) <= glosses.MAX_GLOSS_CHARS:
                seen.setdefault(clean, None)
        return tuple(seen)[: glosses.MAX_GLOSSES]


class GlossError(ValueError):
    """The model cannot write the glosses (no key, refused key, quota, malformed replies); one line says which."""


def user_prompt(article: Article) -> str:
    """The article as the model sees it: its headings for context and its text, never the norm's name (the cache
    key is the text alone, so the same article in another norm reuses its glosses)."""
    context = " / ".join(article.headings)
    return (f"Ubicación: {context}\n" if context else "") + f"Texto del artículo:\n{article.text}"


def cache_key(article: Article, model: str) -> str:
    h = hashlib.sha256()
    for part in (PROMPT_VERSION, model, user_prompt(article)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class Pricing:
    model: str
    price_in_per_m: float
    price_out_per_m: float


@dataclass(slots=True)
class Plan:
    """What a run will ask for: the articles not in the cache, with an estimate of what they cost."""

    pricing: Pricing
    total: int = 0
    kept: int = 0
    missing: list[Article] = field(default_factory=list)

    @property
    def tokens_in(self) -> int:
        prompt = len(SYSTEM_PROMPT) + 400  # the schema the SDK sends with each request
        return round(sum(prompt + len(user_prompt(a)) for a in self.missing) / CHARS_PER_TOKEN)

    @property
    def tokens_out(self) -> int:
        return OUTPUT_TOKENS_PER_ARTICLE * len(self.missing)

    @property
    def cost(self) -> float:
        p = self.pricing
        return (self.tokens_in * p.price_in_per_m + self.tokens_out * p.price_out_per_m) / 1_000_000

    def cost_of(self, article: Article) -> float:
        """One article's share of the estimate: what the ceiling checks before each request."""
        p = self.pricing
        tokens_in = (len(SYSTEM_PROMPT) + 400 + len(user_prompt(article))) / CHARS_PER_TOKEN
        return (tokens_in * p.price_in_per_m + OUTPUT_TOKENS_PER_ARTICLE * p.price_out_per_m) / 1_000_000

    def summary(self) -> str:
        p = self.pricing
        cached = self.total - self.kept - len(self.missing)
        kept = f", {self.kept} kept from the worksheet" if self.kept else ""
        return (
            f"glosses: {self.total} articles, {len(self.missing)} to write with {p.model} ({cached} cached{kept}); "
            f"about {self.tokens_in:,} tokens in and {self.tokens_out:,} out, about ${self.cost:.4f} at "
            f"${p.price_in_per_m:g}/${p.price_out_per_m:g} per million tokens in/out "
            "(an estimate from the article text: the bill is what the provider counts)"
        )


def plan(articles: Iterable[tuple[Article, bool]], cache: GlossCache, pricing: Pricing) -> Plan:
    """What writing these (article, kept from a worksheet) will cost."""
    out = Plan(pricing)
    seen: set[str] = set()
    for article, kept in articles:
        out.total += 1
        out.kept += kept
        if kept:
            continue
        key = cache_key(article, pricing.model)
        if cache.get(key) is None and key not in seen:
            seen.add(key)
            out.missing.append(article)
    return out


def confirm(summary: str, yes: bool, ask: Callable[[str], str] = input) -> None:
    """Print the estimate; go on with `--yes`, or when a person at a terminal says so; GlossError otherwise."""
    print(summary, flush=True)
    if yes:
        return
    if not sys.stdin.isatty():
        raise GlossError("not writing glosses without confirmation: pass --yes to accept the estimate above")
    if ask("go on? [y/N] ").strip().lower() not in ("y", "yes", "s", "si", "sí"):
        raise GlossError("not writing glosses: not confirmed")


def _print(line: str) -> None:
    print(line, flush=True)


@dataclass(slots=True)
class Run:
    """One run's requests across all its norms: the progress it reports and what the endpoint counted.

    `max_cost` (dollars; None when a person confirmed the estimate) is the ceiling of an unattended run: a request
    expected to take the counted spend over it is not sent."""

    client: OpenAI | None
    plan: Plan
    say: Callable[[str], None] = field(default=_print)
    max_cost: float | None = None
    concurrency: int = 1
    asked: int = 0
    used_in: int = 0
    used_out: int = 0

    @property
    def spent(self) -> float:
        p = self.plan.pricing
        return (self.used_in * p.price_in_per_m + self.used_out * p.price_out_per_m) / 1_000_000

    def next_cost(self, article: Article) -> float:
        """What the next request is expected to cost: its estimate, or what replies have cost on average so far
        when the endpoint counts more than the estimate foresaw."""
        return max(self.plan.cost_of(article), self.spent / self.asked if self.asked else 0.0)

    def finish(self) -> None:
        if self.asked:
            self.say(
                f"glosses: the endpoint counted {self.used_in:,} tokens in and {self.used_out:,} out "
                f"(about ${self.spent:.4f} at the configured prices)"
            )


def check_ceiling(plan: Plan, max_cost: float) -> None:
    """Refuse a run whose estimate is over the operator's ceiling before anything is paid."""
    if plan.missing and plan.cost > max_cost:
        raise GlossError(
            f"not writing glosses: {len(plan.missing)} articles are estimated at about ${plan.cost:.4f}, over "
            f"PANAMA_LAW_GLOSS_MAX_COST (${max_cost:g})"
        )


def from_cache(articles: Sequence[Article], cache: GlossCache, model: str) -> dict[int, tuple[str, ...]]:
    """The glosses the cache already holds for these articles, by position: free, and no request is sent."""
    out: dict[int, tuple[str, ...]] = {}
    for pos, article in enumerate(articles):
        cached = cache.get(cache_key(article, model))
        if cached:
            out[pos] = cached
    return out
