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
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ValidationError

from ..norms import Article
from . import glosses
from .gloss_store import GlossCache

if TYPE_CHECKING:
    from openai import OpenAI
    from tenacity import RetryCallState

log = logging.getLogger(__name__)

PROMPT_VERSION = "1"
"""Part of every cache key: a changed prompt writes new glosses rather than reusing the old prompt's."""
CHARS_PER_TOKEN = 4.0
"""Spanish legal text runs about four characters per token: enough for an estimate, which is all it claims."""
OUTPUT_TOKENS_PER_ARTICLE = 350
"""About 6-8 short glosses and the JSON around them."""
MAX_ATTEMPTS = 5
RETRY_WAIT_BASE_S = 1.0
RETRY_WAIT_MAX_S = 60.0
PROGRESS_EVERY = 10

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


def _retry_after(exc: BaseException) -> float | None:
    from openai import APIStatusError

    if not isinstance(exc, APIStatusError):
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = exc.response.headers.get(header)
        if value is not None:
            try:
                return min(RETRY_WAIT_MAX_S, max(0.0, float(value) / divisor))
            except ValueError:
                continue
    return None


def _transient(exc: BaseException) -> bool:
    """429 (but not an exhausted quota), 5xx, timeouts, dropped connections, and a reply that broke the schema."""
    import openai

    if isinstance(exc, openai.RateLimitError):
        return not _quota(exc)
    if isinstance(exc, openai.APIStatusError) and exc.status_code in (408, 409):  # as the SDK's own retries
        return True
    return isinstance(
        exc, (openai.InternalServerError, openai.APIConnectionError, _Malformed)
    )  # APITimeoutError is an APIConnectionError


def _quota(exc: BaseException) -> bool:
    """An exhausted quota is a 429 too, but waiting does not refill it (OpenAI says so in `code` and `type`)."""
    import openai

    return isinstance(exc, openai.RateLimitError) and "insufficient_quota" in (exc.code, exc.type)


def _wait(state: RetryCallState) -> float:
    backoff = min(RETRY_WAIT_MAX_S, RETRY_WAIT_BASE_S * 2 ** (state.attempt_number - 1))
    exc = state.outcome.exception() if state.outcome else None
    after = _retry_after(exc) if exc else None
    return float(max(backoff, after)) if after is not None else float(backoff)


class _Malformed(Exception):
    """The reply did not fit `ArticleGlosses` (not JSON, a missing field, cut short, refused)."""


def _ask(client: OpenAI, model: str, article: Article) -> tuple[tuple[str, ...], int, int]:
    import openai

    try:
        completion = client.chat.completions.parse(
            model=model,
            messages=[
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user_prompt(article)},
            ],
            response_format=ArticleGlosses,
        )
    except (ValidationError, openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
        raise _Malformed(type(exc).__name__) from exc
    choice = completion.choices[0] if completion.choices else None
    parsed = choice.message.parsed if choice else None
    if parsed is None or not parsed.texts():
        raise _Malformed("no glosses in the reply")
    usage = completion.usage
    return parsed.texts(), usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0


def _one_line(exc: BaseException, article: Article) -> GlossError:
    import openai

    where = f"artículo {article.label}"
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return GlossError(f"the model endpoint refused the key (HTTP {exc.status_code}): check OPENAI_API_KEY")
    if _quota(exc):
        return GlossError("the model endpoint says the account's quota is used up (insufficient_quota)")
    if isinstance(exc, _Malformed):
        return GlossError(f"the model's reply for {where} did not fit the glosses schema after {MAX_ATTEMPTS} tries")
    if isinstance(exc, openai.APIStatusError) and _transient(exc):
        return GlossError(f"the model endpoint kept failing at {where} (HTTP {exc.status_code}); run again to resume")
    if isinstance(exc, openai.APIStatusError):  # a wrong model name, a bad base URL: the endpoint's own words
        said = " ".join(_redacted(str(exc.message)).split())[:200]
        return GlossError(f"the model endpoint refused the request at {where} (HTTP {exc.status_code}: {said})")
    return GlossError(f"cannot reach the model endpoint at {where} ({type(exc).__name__}); run again to resume")


def _redacted(text: str) -> str:
    """An endpoint's own message without the key, should an endpoint echo it back."""
    key = os.environ.get("OPENAI_API_KEY", "").strip()
    return text.replace(key, "[OPENAI_API_KEY]") if len(key) >= 8 else text


def client_from_env(timeout_s: float) -> OpenAI:
    """The official SDK client on OPENAI_API_KEY / OPENAI_BASE_URL; its own retries off (ours honour Retry-After
    and know which failures are worth another try)."""
    from openai import OpenAI

    if not os.environ.get("OPENAI_API_KEY", "").strip():
        raise GlossError("--write-glosses needs OPENAI_API_KEY (and OPENAI_BASE_URL for an endpoint other than OpenAI)")
    return OpenAI(max_retries=0, timeout=timeout_s)


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


_Reply = tuple[tuple[str, ...], int, int]  # the glosses, tokens in, tokens out


def write(
    articles: Sequence[Article], cache: GlossCache, run: Run, kept: dict[int, tuple[str, ...]] | None = None
) -> dict[int, tuple[str, ...]]:
    """Glosses by article position: `kept` ones as they are, the others from the cache or the model (`run.client`
    is None when all are cached); each reply is cached as it arrives (`_Requests`)."""
    model = run.plan.pricing.model
    out: dict[int, tuple[str, ...]] = dict(kept or {})
    queue: list[tuple[int, Article, str]] = []
    for pos, article in enumerate(articles):
        if pos in out:
            continue
        key = cache_key(article, model)
        cached = cache.get(key)
        if cached is not None:
            out[pos] = cached
        else:
            queue.append((pos, article, key))
    if queue:
        if run.client is None:
            raise GlossError(f"no model client for artículo {queue[0][1].label}, which is not cached")
        _Requests(run, run.client, cache, out).ask_all(queue)
    return out


class _Requests:
    """One norm's requests to the model, up to `run.concurrency` in flight at once.

    Why at once: a model answers one article in seconds, so a code of a thousand articles asked one at a time takes
    most of an hour. Replies are cached as they arrive, from this thread only (the cache file has one writer). On a
    failure, a Ctrl-C or the cost ceiling no new request is sent; those already in flight are waited for and their
    replies cached (they are paid for), then the run stops, and the next run pays for none of them again. A second
    Ctrl-C stops at once. The first request goes alone (`_send`)."""

    def __init__(self, run: Run, client: OpenAI, cache: GlossCache, out: dict[int, tuple[str, ...]]) -> None:
        self.run, self.client, self.cache, self.out = run, client, cache, out
        self.width = max(1, run.concurrency)
        self.todo = len(run.plan.missing)
        self.in_flight: dict[Future[_Reply], tuple[int, Article, str]] = {}
        self.stop: GlossError | Literal["ceiling", "interrupted"] | None = None  # why no new request is sent

    def ask_all(self, queue: list[tuple[int, Article, str]]) -> None:
        pending = list(reversed(queue))  # popped from the end: in article order
        pool = ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="glosses")
        try:
            while True:
                self._send(pool, pending)
                if not self.in_flight:
                    break
                try:
                    done, _ = wait(self.in_flight, return_when=FIRST_COMPLETED)
                except KeyboardInterrupt:
                    self.stop = self.stop if isinstance(self.stop, GlossError) else "interrupted"
                    self.run.say(f"glosses: interrupted; waiting for the {len(self.in_flight)} replies asked for")
                    continue
                for fut in done:
                    self._collect(fut)
        except KeyboardInterrupt:  # a second Ctrl-C while the replies in flight were awaited
            pool.shutdown(wait=False, cancel_futures=True)
            raise GlossError(f"interrupted; {self.run.asked} replies are cached, run again to resume") from None
        pool.shutdown(wait=True)
        self._raise_why_stopped()

    def _send(self, pool: ThreadPoolExecutor, pending: list[tuple[int, Article, str]]) -> None:
        run = self.run
        # One request alone until a reply comes back: a refused key, an exhausted quota or a wrong model name then
        # costs one request and one line, not one per request in flight.
        width = self.width if run.asked else 1
        while self.stop is None and pending and len(self.in_flight) < width:
            pos, article, key = pending[-1]
            # what is in flight will be billed too: the ceiling holds once every request is answered
            expected = (len(self.in_flight) + 1) * run.next_cost(article)
            if run.max_cost is not None and run.spent + expected > run.max_cost:
                self.stop = "ceiling"
                return
            pending.pop()
            fut = pool.submit(_ask_with_retries, self.client, run.plan.pricing.model, article)
            self.in_flight[fut] = (pos, article, key)

    def _collect(self, fut: Future[_Reply]) -> None:
        pos, article, key = self.in_flight.pop(fut)
        try:
            texts, tokens_in, tokens_out = fut.result()
        except KeyboardInterrupt:  # raised inside a request: a Ctrl-C that reached a request's thread
            self.stop = self.stop or "interrupted"
            return
        except Exception as exc:
            self.stop = self.stop or _one_line(exc, article)
            return
        self.cache.put(key, texts)
        self.out[pos] = texts
        run = self.run
        run.asked, run.used_in, run.used_out = run.asked + 1, run.used_in + tokens_in, run.used_out + tokens_out
        if run.asked % PROGRESS_EVERY == 0 or run.asked == self.todo:
            run.say(f"glosses: {run.asked}/{self.todo} articles written")

    def _raise_why_stopped(self) -> None:
        run = self.run
        if self.stop == "interrupted":
            raise GlossError(f"interrupted; {run.asked} replies are cached, run again to resume")
        if self.stop == "ceiling":
            raise GlossError(
                f"stopped after {run.asked} replies (cached): the endpoint counted about ${run.spent:.4f} and the "
                f"next article would pass PANAMA_LAW_GLOSS_MAX_COST (${run.max_cost:g})"
            )
        if self.stop is not None:
            raise self.stop


def _ask_with_retries(client: OpenAI, model: str, article: Article) -> _Reply:
    """One article's reply, retried on what retrying can fix, in the request's own thread."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt

    retrying = Retrying(
        stop=stop_after_attempt(MAX_ATTEMPTS), wait=_wait, retry=retry_if_exception(_transient), reraise=True
    )
    return retrying(_ask, client, model, article)
