"""`import --write-glosses` against a local stand-in of the Chat Completions endpoint, through the real openai SDK.

Pins: the worksheet is written and imported as `--glosses` would import it (a gloss's wording finds its article),
the estimate is confirmed before anything is paid, the cache makes a re-run free and a failed run resumable, rate
limits and transient failures are retried (Retry-After honoured), and a refused key, an exhausted quota or a
malformed reply is one line on stderr with the index left as it was.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from panama_law import __main__ as cli
from panama_law.index import build
from panama_law.index import disk as index
from panama_law.ingest import gloss_requests, gloss_store, glosses
from panama_law.ingest.sources import ImportOptions, read_norms
from panama_law.retrieve.search import Searcher
from panama_law.serve import loading
from panama_law.serve.server import ServerState
from panama_law.settings import ServerSettings
from tests.gloss_endpoint import AUTH_BODY, QUOTA_BODY, Failure, GlossEndpoint, running
from tests.norm_fixtures import LEY_NAME, LEY_TXT
from tests.search_server import serving_state

RATE_LIMIT_BODY = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[GlossEndpoint]:
    with running() as ep:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", ep.url)
        monkeypatch.setattr(gloss_requests, "RETRY_WAIT_BASE_S", 0.01)
        yield ep


@pytest.fixture
def data_dir(tmp_path: Path, built_dir: Path) -> Path:
    out = tmp_path / "index"
    out.mkdir()
    shutil.copy(index.index_path(built_dir), index.index_path(out))
    return out


@pytest.fixture
def law(tmp_path: Path) -> Path:
    folder = tmp_path / "ley"
    folder.mkdir()
    return Path(shutil.copy(LEY_TXT, folder / LEY_TXT.name))


@pytest.fixture
def one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests one at a time, for the tests that script a failure by request number."""
    monkeypatch.setenv("PANAMA_LAW_GLOSS_CONCURRENCY", "1")


def _articles() -> int:
    (parsed,) = read_norms(LEY_TXT, ImportOptions(norm=LEY_NAME, expected_sha256=None))
    return len(parsed.articles)


def _run(capsys: pytest.CaptureFixture[str], data_dir: Path, law: Path, *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli.main(["import", str(law), "--norm", LEY_NAME, "--data-dir", str(data_dir), "--wait", "0", *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def _worksheet(law: Path) -> list[dict[str, object]]:
    path = law.with_name("ley_de_prueba.glosses.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _one_error_line(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0]


def test_the_model_writes_a_worksheet_that_is_imported_as_glosses_and_searched(
    endpoint: GlossEndpoint, data_dir: Path, law: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _run(capsys, data_dir, law, "--write-glosses", "--yes", "--gloss-model", "modelo-de-prueba")
    assert rc == 0, err
    n = _articles()
    assert len(endpoint.requests) == n
    assert f"glosses: {n} articles, {n} to write with modelo-de-prueba (0 cached)" in out
    assert f"glosses: {n}/{n} articles written" in out
    schema = endpoint.schemas[0]
    assert schema["type"] == "json_schema" and schema["json_schema"]["strict"] is True
    assert set(schema["json_schema"]["schema"]["properties"]) == {"preguntas", "situaciones", "sinonimos"}
    rows = _worksheet(law)
    assert [r["article"] for r in rows][:2] == ["1", "2"] and all(r["glosses"] for r in rows)
    stored = index.norm_glosses(data_dir, LEY_NAME)
    assert [list(stored[i]) for i in range(n)] == [r["glosses"] for r in rows]
    third = next(r for r in rows if r["article"] == "3")
    question = str(third["glosses"][0])  # type: ignore[index]
    hits = Searcher(index.load(data_dir)).search(question)  # the law alone ranks artículo 4 first for it
    assert hits[0].article.citation == f"{LEY_NAME}, artículo 3"
    # The worksheet is the form `import --glosses` reads: edited and imported again, the edit is what is indexed.
    third["glosses"] = ["una glosa escrita a mano por el equipo"]
    law.with_name("ley_de_prueba.glosses.jsonl").write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8"
    )
    assert glosses.read(law.with_name("ley_de_prueba.glosses.jsonl"))["3"] == (
        "una glosa escrita a mano por el equipo",
    )
    rc, _, err = _run(capsys, data_dir, law, "--glosses", str(law.with_name("ley_de_prueba.glosses.jsonl")))
    assert rc == 0, err
    assert index.norm_glosses(data_dir, LEY_NAME)[2] == ("una glosa escrita a mano por el equipo",)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_estimate_is_confirmed_before_anything_is_paid(
    endpoint: GlossEndpoint,
    data_dir: Path,
    law: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = index.index_path(data_dir).read_bytes()
    rc, out, err = _run(capsys, data_dir, law, "--write-glosses")  # stdin is not a terminal here
    assert rc == 1 and endpoint.requests == []
    _one_error_line(err, "pass --yes")
    assert "$" in out and "per million tokens" in out and "an estimate" in out
    monkeypatch.setattr(sys, "stdin", _Terminal("n\n"))
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses")
    assert rc == 1 and endpoint.requests == []
    _one_error_line(err, "not confirmed")
    assert index.index_path(data_dir).read_bytes() == before
    monkeypatch.setattr(sys, "stdin", _Terminal("s\n"))
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses")
    assert rc == 0, err
    assert len(endpoint.requests) == _articles()


def test_a_second_run_pays_nothing_and_an_edited_article_pays_once(
    endpoint: GlossEndpoint, data_dir: Path, law: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, data_dir, law, "--write-glosses", "--yes")[0] == 0
    first = len(endpoint.requests)
    rc, out, _ = _run(capsys, data_dir, law, "--write-glosses")  # no --yes needed: nothing to pay
    assert rc == 0 and len(endpoint.requests) == first
    assert f"all {first} articles have them" in out
    text = law.read_text(encoding="utf-8")
    edited = "es la autoridad encargada de aplicar esta Ley y de publicar sus informes"
    law.write_text(text.replace("es la autoridad encargada de aplicar esta Ley", edited), encoding="utf-8")
    rc, out, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 0, err
    assert len(endpoint.requests) == first + 1 and "publicar sus informes" in endpoint.requests[-1]
    assert f"{first} articles, 1 to write with gpt-4o-mini (0 cached, {first - 1} kept from the worksheet)" in out


@pytest.mark.parametrize("failure", [Failure(500), Failure(drop=True)], ids=["500-storm", "dropped-connection"])
def test_a_run_that_fails_midway_keeps_what_was_paid_and_the_rerun_asks_only_the_rest(
    endpoint: GlossEndpoint,
    data_dir: Path,
    law: Path,
    capsys: pytest.CaptureFixture[str],
    failure: Failure,
    one_at_a_time: None,
) -> None:
    before = index.index_path(data_dir).read_bytes()
    k = 5
    endpoint.fail_from = (k, failure)
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 1
    _one_error_line(err, "run again to resume")
    assert len(endpoint.requests) == k - 1 + gloss_requests.MAX_ATTEMPTS  # the failing one retried, then given up
    assert index.index_path(data_dir).read_bytes() == before  # nothing imported
    assert not law.with_name("ley_de_prueba.glosses.jsonl").exists()
    paid = set(endpoint.requests[: k - 1])
    endpoint.fail_from, endpoint.requests = None, []
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 0, err
    assert len(endpoint.requests) == _articles() - (k - 1) and not paid & set(endpoint.requests)


def test_ctrl_c_keeps_the_replies_already_paid_for(
    endpoint: GlossEndpoint,
    data_dir: Path,
    law: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    one_at_a_time: None,
) -> None:
    ask, calls = gloss_requests._ask, []

    def interrupted_on_the_third(*args: Any) -> Any:
        calls.append(args)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return ask(*args)

    monkeypatch.setattr(gloss_requests, "_ask", interrupted_on_the_third)
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 1 and len(endpoint.requests) == 2
    _one_error_line(err, "interrupted; 2 replies are cached")
    monkeypatch.setattr(gloss_requests, "_ask", ask)
    assert _run(capsys, data_dir, law, "--write-glosses", "--yes")[0] == 0
    assert len(endpoint.requests) == _articles()  # 2 before the interruption, the rest after: none twice
    assert len(set(endpoint.requests)) == _articles()


def test_rate_limits_and_transient_failures_are_retried_honouring_retry_after(
    endpoint: GlossEndpoint, data_dir: Path, law: Path, capsys: pytest.CaptureFixture[str], one_at_a_time: None
) -> None:
    endpoint.failures = {
        2: Failure(429, RATE_LIMIT_BODY, headers={"Retry-After": "1"}),
        5: Failure(503),
        6: Failure(drop=True),
    }
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 0, err
    assert len(endpoint.requests) == _articles() + 3
    assert endpoint.requests[1] == endpoint.requests[2]  # the limited request, asked again
    assert endpoint.times[2] - endpoint.times[1] >= 1.0  # after the Retry-After, not the 10 ms backoff
    assert endpoint.times[4] - endpoint.times[3] < 0.9


@pytest.mark.parametrize(
    ("failure", "needle", "requests"),
    [
        (Failure(429, QUOTA_BODY), "quota is used up", 1),
        (Failure(403, AUTH_BODY), "refused the key (HTTP 403)", 1),
        (Failure(malformed=True), "did not fit the glosses schema", gloss_requests.MAX_ATTEMPTS),
        (Failure(404, {"error": {"message": "The model `nada` does not exist"}}), "`nada` does not exist", 1),
    ],
    ids=["quota", "forbidden", "malformed", "unknown-model"],
)
def test_what_retrying_cannot_fix_is_one_line_and_the_index_is_unchanged(
    endpoint: GlossEndpoint,
    data_dir: Path,
    law: Path,
    capsys: pytest.CaptureFixture[str],
    failure: Failure,
    needle: str,
    requests: int,
) -> None:
    before = index.index_path(data_dir).read_bytes()
    endpoint.fail_from = (1, failure)
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 1
    _one_error_line(err, needle)
    assert len(endpoint.requests) == requests
    assert index.index_path(data_dir).read_bytes() == before


def test_a_refused_key_is_one_line_on_stderr_from_the_real_command(
    endpoint: GlossEndpoint, data_dir: Path, law: Path
) -> None:
    """Run as an operator runs it: the SDK's and HTTP client's own logging must not add lines."""
    before = index.index_path(data_dir).read_bytes()
    endpoint.fail_from = (1, Failure(401, AUTH_BODY))
    argv = ["import", str(law), "--norm", LEY_NAME, "--data-dir", str(data_dir), "--write-glosses", "--yes"]
    done = subprocess.run(
        [sys.executable, "-m", "panama_law", *argv], capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )
    assert done.returncode == 1
    _one_error_line(done.stderr, "refused the key (HTTP 401)", "OPENAI_API_KEY")
    assert len(endpoint.requests) == 1
    assert index.index_path(data_dir).read_bytes() == before


def test_no_key_is_one_line_before_any_request(
    endpoint: GlossEndpoint,
    data_dir: Path,
    law: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 1 and endpoint.requests == []
    _one_error_line(err, "needs OPENAI_API_KEY")


def test_a_folder_gets_a_worksheet_for_each_law_without_one(
    endpoint: GlossEndpoint, data_dir: Path, law: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(LEY_TXT.with_name("ley_de_prueba.meta.json"), law.with_name("ley_de_prueba.meta.json"))
    capsys.readouterr()
    argv = ["import", str(law.parent), "--data-dir", str(data_dir), "--wait", "0", "--write-glosses", "--yes"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert len(endpoint.requests) == _articles()
    assert len(index.norm_glosses(data_dir, LEY_NAME)) == _articles()
    assert cli.main(argv) == 0  # the worksheet now beside the law is the team's: kept, not written again
    assert len(endpoint.requests) == _articles()


def test_a_cache_line_torn_by_a_crash_is_skipped_and_the_rest_kept(tmp_path: Path) -> None:
    cache = gloss_store.GlossCache(tmp_path / gloss_store.CACHE_FILE)
    cache.put("a", ("primera glosa",))
    cache.put("b", ("segunda glosa",))
    with cache.path.open("a", encoding="utf-8") as fh:
        fh.write('{"key": "c", "glosses": ["cortada a me')  # the process died mid-write
    reread = gloss_store.GlossCache(cache.path)
    assert reread.entries == {"a": ("primera glosa",), "b": ("segunda glosa",)}
    reread.put("c", ("escrita otra vez",))
    assert gloss_store.GlossCache(cache.path).entries["c"] == ("escrita otra vez",)


def test_an_endpoint_message_that_echoes_the_key_is_shown_without_it(
    endpoint: GlossEndpoint, data_dir: Path, law: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint.fail_from = (1, Failure(400, {"error": {"message": "bad request for key sk-test-key, model m"}}))
    rc, out, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 1
    _one_error_line(err, "bad request for key [OPENAI_API_KEY]")
    assert "sk-test-key" not in out + err


def test_a_yes_run_over_the_cost_ceiling_is_refused_before_any_request(
    endpoint: GlossEndpoint,
    data_dir: Path,
    law: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = index.index_path(data_dir).read_bytes()
    monkeypatch.setenv("PANAMA_LAW_GLOSS_MAX_COST", "0.0001")
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 1 and endpoint.requests == []
    _one_error_line(err, "over PANAMA_LAW_GLOSS_MAX_COST ($0.0001)")
    assert index.index_path(data_dir).read_bytes() == before
    monkeypatch.setattr(sys, "stdin", _Terminal("s\n"))  # a person who read the estimate decides for themselves
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses")
    assert rc == 0, err
    assert len(endpoint.requests) == _articles()


def test_the_ceiling_stops_a_run_before_the_request_that_would_pass_what_the_endpoint_counted(
    endpoint: GlossEndpoint,
    data_dir: Path,
    law: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The estimate passes, but the bill runs higher: at 0.15 $/M, 100k counted tokens a reply is $0.015 each."""
    monkeypatch.setenv("PANAMA_LAW_GLOSS_MAX_COST", "0.04")
    endpoint.prompt_tokens = 100_000
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 1
    _one_error_line(err, "stopped after 2 replies", "PANAMA_LAW_GLOSS_MAX_COST ($0.04)")
    assert len(endpoint.requests) == 2  # a third would have taken the counted $0.030 past $0.04


# ---- several requests at once ----------------------------------------------------------------------------------


def test_requests_go_several_at_once_once_the_first_reply_is_back_and_each_article_is_asked_once(
    endpoint: GlossEndpoint,
    data_dir: Path,
    law: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PANAMA_LAW_GLOSS_CONCURRENCY requests in flight (a model takes seconds per article), but the first alone: a
    refused key or a wrong model then costs one request."""
    monkeypatch.setenv("PANAMA_LAW_GLOSS_CONCURRENCY", "3")
    endpoint.delay_s = 0.05
    rc, out, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 0, err
    assert endpoint.most_active == 3
    assert endpoint.times[1] >= endpoint.answered[0]  # the second request waited for the first reply
    assert len(endpoint.requests) == len(set(endpoint.requests)) == _articles()
    assert f"glosses: {_articles()}/{_articles()} articles written" in out
    assert len(_worksheet(law)) == _articles()


@pytest.mark.parametrize("failure", [Failure(500), Failure(drop=True)], ids=["500-storm", "dropped-connection"])
def test_a_failure_with_requests_in_flight_keeps_every_reply_paid_for_and_the_rerun_asks_only_the_rest(
    endpoint: GlossEndpoint, data_dir: Path, law: Path, capsys: pytest.CaptureFixture[str], failure: Failure
) -> None:
    before = index.index_path(data_dir).read_bytes()
    k = 9
    endpoint.fail_from = (k, failure)  # requests 1..8 answered, every later one fails, with 4 in flight
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 1
    _one_error_line(err, "run again to resume")
    assert index.index_path(data_dir).read_bytes() == before
    paid = set(endpoint.requests[: k - 1])
    endpoint.fail_from, endpoint.requests = None, []
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 0, err
    assert len(endpoint.requests) == _articles() - (k - 1) and not paid & set(endpoint.requests)


def test_ctrl_c_with_requests_in_flight_waits_for_them_and_caches_them(
    endpoint: GlossEndpoint, data_dir: Path, law: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real SIGINT while four requests are held by the model: no new request is sent, the four replies are
    waited for and cached (they are paid for), and the rerun asks for none of them again."""
    endpoint.delay_s = 0.5  # long enough for the signal to arrive while four replies are still on their way

    def press_ctrl_c() -> None:
        _wait_for(lambda: endpoint.active == 4, "four requests in flight")
        os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    presser.start()
    rc, out, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    presser.join(10)
    assert rc == 1
    _one_error_line(err, "interrupted; 5 replies are cached")
    assert "waiting for the 4 replies asked for" in out
    assert len(endpoint.requests) == 5
    first = set(endpoint.requests)
    endpoint.requests, endpoint.delay_s = [], 0.0
    assert _run(capsys, data_dir, law, "--write-glosses", "--yes")[0] == 0
    assert len(endpoint.requests) == _articles() - 5 and not first & set(endpoint.requests)


# ---- `serve` with PANAMA_LAW_NORMS_DIR and PANAMA_LAW_WRITE_GLOSSES ----------------------------------------------


def _folder_settings(data_dir: Path, law: Path, **extra: Any) -> ServerSettings:
    shutil.copy(LEY_TXT.with_name("ley_de_prueba.meta.json"), law.with_name("ley_de_prueba.meta.json"))
    return ServerSettings(data_dir=data_dir, norms_dir=law.parent, write_glosses=True, **extra)


def _wait_for(check: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _served_citations(state: ServerState, question: str) -> list[str]:
    assert state.searcher is not None
    return [hit.article.citation for hit in state.searcher.search(question)]


def test_the_server_serves_a_folder_norm_at_once_and_its_written_glosses_follow_in_the_background(
    endpoint: GlossEndpoint, data_dir: Path, law: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _folder_settings(data_dir, law)
    endpoint.hold = threading.Event()  # the model answers only when the test says so
    state = ServerState()
    options: dict[str, Any] = {
        "loader": lambda: loading.load_searcher(settings),
        "data_dir": data_dir,
        "reloader": lambda: loading.open_searcher(data_dir),
        "recheck_s": 0.2,
    }
    n = _articles()
    with caplog.at_level(logging.INFO), serving_state(state, token=None, **options):
        _wait_for(lambda: state.searcher is not None, "the server to serve the index")
        first = state.searcher.index.generation  # type: ignore[union-attr]
        assert any(info.name == LEY_NAME for info in index.list_norms(data_dir))  # served at once...
        assert index.norm_glosses(data_dir, LEY_NAME) == {}  # ...without glosses, while the model works
        _wait_for(lambda: len(endpoint.requests) == 1, "the first request, in the background")
        endpoint.hold.set()
        _wait_for(lambda: state.searcher.index.generation != first, "the server to reload the glossed norm")  # type: ignore[union-attr]
        assert len(index.norm_glosses(data_dir, LEY_NAME)) == n
        worksheet = data_dir / build.SERVER_WORKSHEETS / "ley_de_prueba.glosses.jsonl"
        rows = [json.loads(line) for line in worksheet.read_text(encoding="utf-8").splitlines()]
        third = next(r for r in rows if r["article"] == "3")
        assert _served_citations(state, third["glosses"][0])[0] == f"{LEY_NAME}, artículo 3"
    assert len(endpoint.requests) == n
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"{n}/{n} articles written" in logged and "an estimate" in logged
    assert "sk-test-key" not in logged and "autoridad encargada" not in logged  # no key, no article text
    # The next start takes every gloss from the cache: nothing to pay, the index already current.
    before = index.index_path(data_dir).read_bytes()
    build.ensure_index(settings)
    assert build.gloss_norms_folder(settings) is False
    assert len(endpoint.requests) == n and index.index_path(data_dir).read_bytes() == before


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ("no-key", "needs OPENAI_API_KEY"),
        ("401", "refused the key (HTTP 401)"),
        ("quota", "quota is used up"),
        ("ceiling", "over PANAMA_LAW_GLOSS_MAX_COST"),
    ],
)
def test_a_server_whose_model_fails_logs_one_line_and_keeps_serving_the_norm_without_glosses(
    endpoint: GlossEndpoint,
    data_dir: Path,
    law: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    setup: str,
    needle: str,
) -> None:
    settings = _folder_settings(data_dir, law, gloss_max_cost=0.0001 if setup == "ceiling" else 1.0)
    if setup == "no-key":
        monkeypatch.delenv("OPENAI_API_KEY")
    elif setup == "401":
        endpoint.fail_from = (1, Failure(401, AUTH_BODY))
    elif setup == "quota":
        endpoint.fail_from = (1, Failure(429, QUOTA_BODY))
    build.ensure_index(settings)
    served = index.index_path(data_dir).read_bytes()
    assert any(info.name == LEY_NAME for info in index.list_norms(data_dir))
    with caplog.at_level(logging.INFO):
        assert build.gloss_norms_folder(settings) is False
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and needle in errors[0] and "served without them" in errors[0], errors
    assert len(endpoint.requests) == (1 if setup in ("401", "quota") else 0)
    assert index.index_path(data_dir).read_bytes() == served  # the norm as it was served, no glosses
    assert "sk-test-key" not in caplog.text


def test_a_server_without_write_glosses_never_asks_the_model(
    endpoint: GlossEndpoint, data_dir: Path, law: Path
) -> None:
    settings = _folder_settings(data_dir, law).model_copy(update={"write_glosses": False})
    loading.load_searcher(settings)
    time.sleep(0.5)  # long enough for a background request to have been sent, were one started
    assert endpoint.requests == [] and index.norm_glosses(data_dir, LEY_NAME) == {}
    assert not (data_dir / gloss_store.CACHE_FILE).exists()


def test_write_glosses_again_keeps_the_teams_edits_and_writes_only_new_amended_or_emptied_articles(
    endpoint: GlossEndpoint, data_dir: Path, law: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, data_dir, law, "--write-glosses", "--yes")[0] == 0
    n = len(endpoint.requests)
    sheet = law.with_name("ley_de_prueba.glosses.jsonl")
    rows = _worksheet(law)
    by_label = {str(r["article"]): r for r in rows}
    by_label["1"]["glosses"] = ["una glosa corregida por el equipo"]
    by_label["2"]["glosses"] = []  # emptied: to be written again
    sheet.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    text = law.read_text(encoding="utf-8")
    law.write_text(text.replace("es la autoridad encargada de aplicar esta Ley", "aplica esta Ley"), encoding="utf-8")
    endpoint.requests = []
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 0, err
    assert len(endpoint.requests) == 1 and "aplica esta Ley" in endpoint.requests[0]  # the amended article only
    again = {str(r["article"]): r for r in _worksheet(law)}
    assert again["1"]["glosses"] == ["una glosa corregida por el equipo"]
    assert again["2"]["glosses"]  # from the cache: paid for once already
    assert index.norm_glosses(data_dir, LEY_NAME)[0] == ("una glosa corregida por el equipo",)
    assert len(again) == n


def test_a_malformed_worksheet_is_one_line_and_left_as_it_is(
    endpoint: GlossEndpoint, data_dir: Path, law: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sheet = law.with_name("ley_de_prueba.glosses.jsonl")
    sheet.write_text('{"article": "1", "glosses": ["bien"]}\n{"article": "2", "glosses": "mal"}\n', encoding="utf-8")
    before = sheet.read_bytes()
    rc, _, err = _run(capsys, data_dir, law, "--write-glosses", "--yes")
    assert rc == 1 and endpoint.requests == []
    _one_error_line(err, "ley_de_prueba.glosses.jsonl:2")
    assert sheet.read_bytes() == before
