"""The embedded search server: corpus import and download, atomic index builds, the MCP contract over real HTTP,
auth, bad input, health, and that clear questions find their article.

The Constitution is read from the shared data directory beside the repository (never copied into it); the
download tests use a visibly synthetic document served from a loopback HTTP server started here.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import numpy as np
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.testclient import TestClient

from panama_law import embedding
from panama_law.contract import INPUT_SCHEMA, TOOL_NAME
from panama_law.evaluate import EvalItem, evaluate
from panama_law.index import disk as index
from panama_law.index.build import build_from_bytes, download_and_build, import_file
from panama_law.ingest import corpus
from panama_law.ingest.corpus import CorpusError
from panama_law.retrieve.search import RANKINGS, Searcher
from panama_law.serve.server import ServerState, build_app
from panama_law.settings import SOURCE_SHA256
from research.search.fit import fit_logistic, threshold
from tests.search_server import SERVER_TOKEN

TOKEN = SERVER_TOKEN

SYNTHETIC = {
    "TÍTULO I - LEY SINTÉTICA DE PRUEBA SOBRE DRAGONES DE PAPEL": {
        "articulo-1": "Los dragones de papel de la Ley Sintética de Prueba deben volar solo los martes.",
        "articulo-2": "Ningún dragón de papel ficticio podrá pesar más de tres nubes imaginarias.",
    },
    "TÍTULO II - NORMAS FICTICIAS DE UNICORNIOS": {
        "Capitulos": {
            "Capítulo 1°: Del Registro Imaginario": {
                "articulo-3": "Todo unicornio de prueba se inscribe en el Registro Imaginario de Criaturas.",
            }
        }
    },
}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_digest(path: Path) -> str:
    return _sha(path.read_bytes())


async def _with_session(url: str, token: str | None, fn: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=10) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await fn(session)


# --- corpus and index --------------------------------------------------------------------------------------------


def test_parse_reads_every_article_with_its_titulo_and_capitulo(constitution_bytes: bytes) -> None:
    articles = corpus.parse(constitution_bytes)
    assert [a.number for a in articles] == list(range(1, 329))
    by_number = {a.number: a for a in articles}
    assert by_number[72].capitulo is not None and "TÍTULO III" in by_number[72].titulo
    assert by_number[72].citation == "Constitución Política de la República de Panamá, artículo 72"
    assert by_number[1].capitulo is None


def test_index_build_from_shared_data(built_dir: Path, searcher: Searcher) -> None:
    loaded = index.load(built_dir)
    assert len(loaded.articles) == 328
    assert len(loaded.passages) >= 328
    assert loaded.passage_vectors.shape == (len(loaded.passages), embedding.DIM)
    assert loaded.source_sha256 == SOURCE_SHA256
    assert not list(built_dir.glob("*.tmp")), "no temporary files left behind"


def test_bad_checksum_and_malformed_file_leave_existing_index_untouched(
    tmp_path: Path, built_dir: Path, constitution_bytes: bytes
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    target = index.index_path(data_dir)
    target.write_bytes(index.index_path(built_dir).read_bytes())
    before = _file_digest(target)

    with pytest.raises(CorpusError, match="checksum mismatch"):
        build_from_bytes(constitution_bytes + b" ", data_dir, SOURCE_SHA256)
    malformed = b'{"TITULO I": {"articulo-1": 42}}'
    with pytest.raises(CorpusError, match="malformed"):
        build_from_bytes(malformed, data_dir, _sha(malformed))
    with pytest.raises(CorpusError, match="malformed"):
        build_from_bytes(b"not json at all", data_dir, None)
    with pytest.raises(CorpusError, match="cannot read"):
        import_file(tmp_path / "missing.json", data_dir, None)

    assert _file_digest(target) == before
    assert sorted(p.name for p in data_dir.iterdir()) == [index.INDEX_FILE]


# --- download against a loopback HTTP server ----------------------------------------------------------------------


@pytest.fixture()
def synthetic_http() -> Iterator[tuple[str, bytes]]:
    body = json.dumps(SYNTHETIC, ensure_ascii=False).encode("utf-8")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/ley_sintetica.json":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", body
    httpd.shutdown()
    httpd.server_close()


def test_download_with_good_checksum_builds_index(tmp_path: Path, synthetic_http: tuple[str, bytes]) -> None:
    base, body = synthetic_http
    download_and_build(f"{base}/ley_sintetica.json", tmp_path, _sha(body))
    loaded = index.load(tmp_path)
    assert [a.number for a in loaded.articles] == [1, 2, 3]
    assert loaded.articles[2].capitulo == "Capítulo 1°: Del Registro Imaginario"
    hits = Searcher(loaded).search("registro de unicornios")
    assert hits and hits[0].article.number == 3


def test_download_with_bad_checksum_or_http_error_is_refused(tmp_path: Path, synthetic_http: tuple[str, bytes]) -> None:
    base, _ = synthetic_http
    with pytest.raises(CorpusError, match="checksum mismatch"):
        download_and_build(f"{base}/ley_sintetica.json", tmp_path, "0" * 64)
    with pytest.raises(CorpusError, match="download failed"):
        download_and_build(f"{base}/missing.json", tmp_path, "0" * 64)
    assert not index.index_path(tmp_path).exists()


# --- the MCP server over HTTP -------------------------------------------------------------------------------------


async def test_tools_list_matches_the_contract(server_url: str) -> None:
    tools = await _with_session(server_url, TOKEN, lambda s: s.list_tools())
    assert [t.name for t in tools.tools] == [TOOL_NAME]
    tool = tools.tools[0]
    assert tool.input_schema == INPUT_SCHEMA
    assert list(tool.input_schema["properties"]) == ["query"]
    assert tool.input_schema["required"] == ["query"]
    assert tool.input_schema["properties"]["query"]["minLength"] == 1
    assert tool.input_schema["properties"]["query"]["maxLength"] == 2000
    assert tool.output_schema and tool.output_schema["required"] == ["results"]


async def test_tools_call_returns_bounded_sources(server_url: str) -> None:
    result = await _with_session(
        server_url, TOKEN, lambda s: s.call_tool(TOOL_NAME, {"query": "me botaron del trabajo estando embarazada"})
    )
    assert not result.is_error
    sources = result.structured_content["results"]
    assert 1 <= len(sources) <= 3
    allowed = {"title", "citation", "excerpt", "date", "gaceta", "official_source_name", "official_source_url"}
    for src in sources:
        assert set(src) <= allowed and {"title", "citation", "excerpt"} <= set(src)
        assert len(src["title"]) <= 1000 and len(src["citation"]) <= 1000 and 0 < len(src["excerpt"]) <= 750
        assert src["citation"].startswith("Constitución Política de la República de Panamá, artículo ")
        assert "gaceta" not in src
    assert sources[0]["citation"].endswith("artículo 72")
    assert "gravidez" in sources[0]["excerpt"]
    assert result.content and "artículo 72" in result.content[0].text


async def test_results_pass_the_gateway_contract(server_url: str) -> None:
    contract = pytest.importorskip("agent.contract")
    tools = await _with_session(server_url, TOKEN, lambda s: s.list_tools())
    tool = tools.tools[0]
    contract.check_tool(tool.name, tool.input_schema, tool.output_schema)
    result = await _with_session(
        server_url, TOKEN, lambda s: s.call_tool(TOOL_NAME, {"query": "libertad de culto y religión"})
    )
    validated = contract.validate_results(result.structured_content)
    assert validated.sources and validated.dropped == 0 and validated.truncated == 0


async def test_excerpt_is_the_matching_passage_not_the_start(searcher: Searcher) -> None:
    long_articles = [a for a in searcher.articles if len(a.text) > 1500]
    assert long_articles
    hits = searcher.search("jornada máxima de trabajo de ocho horas diarias")
    assert hits
    for hit in hits:
        assert len(hit.excerpt) <= 750


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": ""},
        {"query": "   "},
        {"query": "x" * 2001},
        {"query": "huelga", "extra": 1},
        {"query": 42},
        {},
    ],
    ids=["empty", "blank", "too-long", "extra-property", "wrong-type", "missing"],
)
async def test_bad_input_is_an_mcp_error_and_server_keeps_serving(server_url: str, arguments: dict[str, Any]) -> None:
    async def call(s: ClientSession) -> Any:
        try:
            result = await s.call_tool(TOOL_NAME, arguments)
        except MCPError:
            return "jsonrpc-error"
        assert result.is_error, result
        good = await s.call_tool(TOOL_NAME, {"query": "derecho de huelga"})
        assert not good.is_error and good.structured_content["results"]
        return "is-error"

    assert await _with_session(server_url, TOKEN, call) in ("is-error", "jsonrpc-error")


async def test_unknown_tool_is_an_error(server_url: str) -> None:
    async def call(s: ClientSession) -> bool:
        try:
            return (await s.call_tool("otra_herramienta", {"query": "x"})).is_error
        except MCPError:
            return True

    assert await _with_session(server_url, TOKEN, call)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}])
def test_requests_without_the_right_token_get_401(server_url: str, headers: dict[str, str]) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = httpx.post(f"{server_url}/mcp", json=body, headers=headers, timeout=5)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_right_token_succeeds_and_no_token_fails_via_client(server_url: str) -> None:
    tools = await _with_session(server_url, TOKEN, lambda s: s.list_tools())
    assert tools.tools
    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 401 as a transport/MCP error
        await _with_session(server_url, None, lambda s: s.list_tools())


def test_health_reports_article_count(server_url: str) -> None:
    response = httpx.get(f"{server_url}/healthz", timeout=5)
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "index_loaded": True, "articles": 328}


def test_health_is_503_without_an_index() -> None:
    with TestClient(build_app(ServerState())) as client:
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["index_loaded"] is False


# --- search quality on questions written for these tests (not from any eval file) ---------------------------------


@pytest.mark.parametrize(
    ("question", "article"),
    [
        ("¿en Panamá existe la pena de muerte?", 30),
        ("puedo practicar cualquier religión que yo quiera", 35),
        ("cuántos años dura el periodo del presidente", 177),
        ("cuáles son los símbolos de la patria, la bandera y el himno", 6),
        ("me botaron estando embarazada, ¿es legal?", 72),
    ],
)
def test_clear_questions_find_their_article_in_top_3(searcher: Searcher, question: str, article: int) -> None:
    assert article in [h.article.number for h in searcher.search(question)]


def test_out_of_scope_question_gets_no_source(searcher: Searcher) -> None:
    assert searcher.search("cuál es la mejor receta de sancocho con ñame") == []


def test_candidate_abstain_signals_see_unknown_words_and_the_lexicon(searcher: Searcher) -> None:
    """The candidates `fit abstain` compares are computed by the fit, beside the signals every query computes."""
    from research.search.fit import candidate_signals

    off_topic = candidate_signals(searcher, "receta de sancocho con otoe")
    assert off_topic.coverage == 0.0 and off_topic.expansion_terms == 0
    on_topic = candidate_signals(searcher, "me botaron del trabajo estando embarazada")
    assert on_topic.coverage > 0.5 and on_topic.expansion_terms > 0
    assert on_topic.gloss_max > off_topic.gloss_max
    assert on_topic.sig.evidence(searcher.config) > off_topic.sig.evidence(searcher.config)


def test_abstain_fit_separates_and_cuts_halfway_below_the_lowest_in_scope_score() -> None:
    x = np.array([[0.1], [0.2], [0.3], [0.5], [0.6], [0.7]])
    y = np.array([0, 0, 0, 1, 1, 1])
    coef, bias = fit_logistic(x, y)
    scores = x @ coef + bias
    assert coef[0] > 0
    assert threshold(scores, y) == pytest.approx((scores[3] + scores[2]) / 2)


def test_every_lexicon_expansion_term_occurs_in_the_constitution(searcher: Searcher) -> None:
    """An expansion the text never uses adds nothing but noise (and false evidence to the abstain rule)."""
    from panama_law.retrieve.lexicon import CONSTITUTION
    from panama_law.text import STOPWORDS, stem

    terms = CONSTITUTION.formal_terms()
    missing = sorted(w for w in terms if w not in STOPWORDS and not searcher.article_bm25.known(stem(w)))
    assert missing == []


def test_no_lexicon_key_is_a_word_every_question_may_hold() -> None:
    """The key "te" stood for the Tribunal Electoral, so "si te paran los policías" then searched for the electoral
    court too. A key that is a common function word (text.STOPWORDS) expands questions that never asked."""
    from panama_law.retrieve.lexicon import CONSTITUTION, EVERYDAY
    from panama_law.text import STOPWORDS, fold

    for lexicon in (CONSTITUTION, EVERYDAY):
        assert sorted(key for key in lexicon.table if fold(key) in STOPWORDS) == []
    assert "tribunal" not in CONSTITUTION.expand("si te paran los policias sin motivo, me pueden llevar preso")


def test_the_shipped_abstain_model_is_what_fit_abstain_gives_on_the_development_pool(searcher: Searcher) -> None:
    """The constants in `SearchConfig` are reproducible: the documented procedure on the documented files gives them
    back. A change to the glosses, the rankings or the signals that moves them must refit them, not drift."""
    from panama_law.evaluate import load_items
    from panama_law.retrieve.search import ABSTAIN_FEATURES
    from research.search.fit import candidate_signals, fit_model
    from tests.constitution import REPO_ROOT

    visible = REPO_ROOT.parent / "shared" / "eval" / "retrieval_visible.jsonl"
    if not visible.is_file():
        pytest.skip("the project's visible eval set is not beside the checkout")
    names = ("dev_extra", "calibration", "heldout", "heldout_callers", "dev_scope")
    items = load_items(visible) + [i for n in names for i in load_items(REPO_ROOT / "bench" / "eval" / f"{n}.jsonl")]
    sigs = [candidate_signals(searcher, item.question) for item in items]
    fitted = fit_model(sigs, np.array([1 if item.gold else 0 for item in items]), ABSTAIN_FEATURES)
    cfg = searcher.config
    assert [round(float(c), 2) for c in fitted.weights] == [cfg.abstain_w_dense, cfg.abstain_w_lex]
    assert round(fitted.bias, 2) == cfg.abstain_bias
    assert round(fitted.cut, 3) == cfg.abstain_below


def test_abstain_cut_refuses_fewer_answerable_questions_when_refusing_costs_more() -> None:
    """Overlapping classes: two out-of-scope scores (0.32, 0.33) sit above one in-scope score (0.3). At equal cost
    the cut refuses that one answerable question (one error, not two); at the default cost it answers all four
    in-scope questions and lets the two out-of-scope ones through."""
    scores = np.array([0.0, 0.1, 0.2, 0.32, 0.33, 0.3, 0.35, 0.9, 1.0])
    y = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1])
    assert threshold(scores, y, refuse_cost=1.0) == pytest.approx((0.33 + 0.35) / 2)
    cut = threshold(scores, y)
    assert cut == pytest.approx((0.2 + 0.3) / 2)
    assert not np.any(scores[y == 1] < cut)


def test_eval_reports_no_source_rate_and_explains_each_miss(searcher: Searcher) -> None:
    items = [
        EvalItem("a", "me botaron estando embarazada", frozenset({72})),
        EvalItem("b", "me botaron estando embarazada", frozenset({1})),  # deliberately wrong gold: a miss
        EvalItem("c", "cuál es la mejor receta de sancocho con ñame", frozenset()),
    ]
    report = evaluate(searcher, items, details=True)
    assert report["in_scope_no_source_rate"] == 0.0 and report["abstain_rate_out_of_scope"] == 1.0
    assert {"recall_at_3", "mrr_at_10", "in_scope_abstained", "out_of_scope_abstained"} <= report.keys()
    (miss,) = report["misses"]
    assert miss["id"] == "b" and miss["ranked_above"]
    assert miss["ranked_above"][0]["article"] == 72
    assert miss["ranked_above"][0]["decided_by"] in RANKINGS
    assert set(miss["gold_ranks"]["1"]) == set(RANKINGS)
