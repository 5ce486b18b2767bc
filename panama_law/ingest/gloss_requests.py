"""The requests that write glosses: sent to the operator's model several at once, retried on what retrying can fix,
and each reply cached the moment it arrives (`write`).

Kept apart from `gloss_writer`, which says what is asked and what a run may cost: this is the part that talks to the
endpoint and decides, reply by reply, whether the run goes on.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Literal

from pydantic import ValidationError

from ..norms import Article
from .gloss_store import GlossCache
from .gloss_writer import SYSTEM_PROMPT, ArticleGlosses, GlossError, Run, cache_key, user_prompt

if TYPE_CHECKING:
    from openai import OpenAI
    from tenacity import RetryCallState

__all__ = ["MAX_ATTEMPTS", "client_from_env", "write"]

MAX_ATTEMPTS = 5
RETRY_WAIT_BASE_S = 1.0
RETRY_WAIT_MAX_S = 60.0
PROGRESS_EVERY = 10


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
