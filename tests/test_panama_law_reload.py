"""A running search server follows its index: `import` and `remove` are served without a restart, a query is
answered wholly from the old index or wholly from the new one, a file that cannot be loaded leaves the old index
served, and the CLI says whether a running server has taken the change.

The server is the real `python -m panama_law serve` in a subprocess on a temp data dir with a few synthetic
articles (fictional, not law), queried with the `mcp` client SDK, as the agent queries it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from panama_law import __main__ as cli
from panama_law.contract import TOOL_NAME
from panama_law.index import disk as index
from panama_law.index.build import import_norms
from panama_law.retrieve.search import Searcher
from panama_law.serve import served
from panama_law.serve.schema import to_source
from panama_law.serve.server import TEST_DELAY_ENV
from tests.norm_fixtures import norm_jsonl
from tests.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
TOKEN = "token-de-prueba-recarga"

BASE_NORM = "Ley sintética de base 1 de 2098"
BASE_TEXTS = [
    "Los pingüinos sintéticos de los parques públicos usan bufanda de lana durante el invierno.",
    "Las jirafas de prueba duermen de pie bajo los árboles del jardín municipal.",
]
NEW_NORM = "Ley 1 de 2030"
NEW_LAW_TXT = """LEY 1 DE 2030
Que regula los dragones de papel

Artículo 1. Los dragones de papel solo podrán volar los martes por la tarde sobre las plazas públicas.

Artículo 2. Ningún dragón de papel podrá pesar más de tres nubes imaginarias.

COMUNÍQUESE Y CÚMPLASE.
"""
NEW_QUESTION = "¿qué días pueden volar los dragones de papel sobre las plazas?"
NEW_CITATION = f"{NEW_NORM}, artículo 1"

# Two versions of one norm whose answers differ for every question below (checked, not assumed).
SWAP_NORM = "Ley sintética de cometas 3 de 2097"
SWAP_V1 = [
    "Las cometas de papel solo podrán volar los martes por la tarde sobre las playas.",
    "Toda cometa de papel se inscribe en el registro municipal de juguetes voladores.",
]
SWAP_V2 = [
    "Las cometas de papel solo podrán volar los domingos por la mañana sobre los cerros.",
    "Ninguna cometa de papel podrá llevar cola de más de diez metros.",
    "Los niños que vuelen cometas de papel usarán guantes de tela.",
]
SWAP_QUESTIONS = [
    "¿qué días pueden volar las cometas de papel?",
    "¿qué reglas hay para las cometas de papel?",
]


# --- helpers -------------------------------------------------------------------------------------------------------


def _base_dir(tmp_path: Path, name: str, extra: list[tuple[str, list[str]]] | None = None) -> Path:
    """A data dir holding the base norm (and `extra` norms), written by the real importer."""
    data = tmp_path / name
    import_norms(norm_jsonl(tmp_path / f"{name}-base.jsonl", BASE_NORM, BASE_TEXTS), data)
    for i, (norm, texts) in enumerate(extra or []):
        import_norms(norm_jsonl(tmp_path / f"{name}-{i}.jsonl", norm, texts), data)
    return data


def _swap_in(source_dir: Path, data_dir: Path) -> None:
    """Put another index file in place the way the store does: a full copy beside it, then one os.replace."""
    tmp = data_dir / ".swap-in.tmp"
    shutil.copyfile(index.index_path(source_dir), tmp)
    os.replace(tmp, index.index_path(data_dir))


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def health(self) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/healthz", timeout=5)
        body: dict[str, Any] = response.json()
        return body

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_generation(self, generation: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while self.health().get("generation") != generation:
            assert time.monotonic() < deadline, f"the server never served {generation}: {self.health()}"
            time.sleep(0.05)


def _server_env() -> dict[str, str]:
    """This environment without any PANAMA_LAW_* setting, so the flags alone configure the server."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PANAMA_LAW_")}


@contextlib.contextmanager
def serve(data_dir: Path, log: Path, env: dict[str, str] | None = None, ready: int = 200) -> Iterator[Served]:
    """`python -m panama_law serve` on `data_dir` and a free loopback port, until the block ends; ready once health
    answers with status `ready` (503: the index could not be loaded)."""
    port = free_port()
    command = [sys.executable, "-m", "panama_law", "serve", "--port", str(port), "--token", TOKEN]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*command, "--data-dir", str(data_dir)],
            cwd=REPO_ROOT,
            env={**_server_env(), **(env or {})},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    running = Served(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, f"the server exited: {running.log_text()}"
            with contextlib.suppress(httpx.HTTPError):
                health = httpx.get(f"{running.url}/healthz", timeout=2)
                if health.status_code == ready and (ready == 200 or health.json()["status"] == "error"):
                    break
            assert time.monotonic() < deadline, f"the server never became healthy: {running.log_text()}"
            time.sleep(0.1)
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


async def _session(url: str, fn: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await fn(session)


async def _results(session: ClientSession, question: str) -> list[dict[str, Any]]:
    result = await session.call_tool(TOOL_NAME, {"query": question})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    results: list[dict[str, Any]] = result.structured_content["results"]
    return results


async def _citations(url: str, question: str) -> list[str]:
    results = await _session(url, lambda s: _results(s, question))
    return [r["citation"] for r in results]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "panama_law", *args],
        cwd=REPO_ROOT,
        env=_server_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _expected(data_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """What the tool returns for each swap question from this index, computed here from the same file."""
    searcher = Searcher(index.load(data_dir))
    return {q: [to_source(hit) for hit in searcher.search(q)] for q in SWAP_QUESTIONS}


# --- served without a restart --------------------------------------------------------------------------------------


async def test_a_running_server_serves_an_imported_law_and_forgets_a_removed_one_without_restart(
    tmp_path: Path,
) -> None:
    """The first-hour path: a server runs, `import law.txt --norm NAME` (the CLI form the journey test uses) adds a
    law, and the next tools/call finds its article, with no restart; `remove` takes it away the same way. Health
    names the generation of the index file as served, and the CLI says the running server took each change."""
    data = _base_dir(tmp_path, "data")
    law = tmp_path / "ley_1_de_2030.txt"
    law.write_text(NEW_LAW_TXT, encoding="utf-8")
    with serve(data, tmp_path / "serve.log") as server:
        before = server.health()
        assert NEW_CITATION not in await _citations(server.url, NEW_QUESTION)

        imported = await asyncio.to_thread(_cli, "import", str(law), "--norm", NEW_NORM, "--data-dir", str(data))
        assert imported.returncode == 0, imported.stderr
        deadline = time.monotonic() + 15
        while NEW_CITATION not in (found := await _citations(server.url, NEW_QUESTION)):
            assert time.monotonic() < deadline, f"the imported law is never served: {found}"
            await asyncio.sleep(0.1)
        assert found[0] == NEW_CITATION
        assert before["generation"] != server.health()["generation"] == index.current_generation(data)
        assert server.health()["articles"] == len(BASE_TEXTS) + 2
        assert "imported Ley 1 de 2030: 2 articles" in imported.stdout
        assert "the running search server now serves it (after " in imported.stdout, imported.stdout

        removed = await asyncio.to_thread(_cli, "remove", NEW_NORM, "--data-dir", str(data))
        assert removed.returncode == 0, removed.stderr
        assert "the running search server now serves it (after " in removed.stdout, removed.stdout
        # The CLI returned after the server took the change: the very next call no longer finds the law.
        assert NEW_CITATION not in await _citations(server.url, NEW_QUESTION)
        assert server.health()["articles"] == len(BASE_TEXTS)
    assert not list((data / served.SERVED_DIR).glob("*.json")), "a stopped server leaves no record behind"


async def test_queries_during_swaps_never_fail_and_each_answer_is_wholly_the_old_or_the_new_index(
    tmp_path: Path,
) -> None:
    """Four clients query without pause while the index file is swapped six times between two versions of a norm.
    Every call succeeds, and every answer equals, field for field, what one of the two index files gives on its own
    (computed here): never a mix. Both versions are seen while the swaps run, and the last one swapped in is what is
    served at the end."""
    v1 = _base_dir(tmp_path, "v1", [(SWAP_NORM, SWAP_V1)])
    v2 = _base_dir(tmp_path, "v2", [(SWAP_NORM, SWAP_V2)])
    expected = {"v1": _expected(v1), "v2": _expected(v2)}
    for question in SWAP_QUESTIONS:  # the test can tell the versions apart only if their answers differ
        assert expected["v1"][question] != expected["v2"][question], question
    data = tmp_path / "data"
    data.mkdir()
    shutil.copyfile(index.index_path(v1), index.index_path(data))

    with serve(data, tmp_path / "serve.log") as server:
        answers: list[tuple[str, list[dict[str, Any]]]] = []
        swapping = True

        async def hammer(offset: int) -> None:
            async def loop(session: ClientSession) -> None:
                n = offset
                while swapping:
                    question = SWAP_QUESTIONS[n % len(SWAP_QUESTIONS)]
                    answers.append((question, await _results(session, question)))
                    n += 1

            await _session(server.url, loop)

        async def swap() -> None:
            nonlocal swapping
            try:
                for n in range(6):
                    await asyncio.sleep(0.4)
                    await asyncio.to_thread(_swap_in, v2 if n % 2 == 0 else v1, data)
                await asyncio.sleep(0.4)
            finally:
                swapping = False

        await asyncio.gather(swap(), *(hammer(i) for i in range(4)))
        server.wait_generation(index.current_generation(v1) or "")
        final = await _session(server.url, lambda s: _results(s, SWAP_QUESTIONS[0]))
        reloads = server.log_text().count("index reloaded")

    seen = set()
    for question, got in answers:
        version = next((v for v in ("v1", "v2") if got == expected[v][question]), None)
        assert version is not None, f"an answer from neither index: {question} -> {got}"
        seen.add(version)
    assert seen == {"v1", "v2"}, f"the swaps were not seen by the queries ({len(answers)} answers)"
    assert final == expected["v1"][SWAP_QUESTIONS[0]], "the last index swapped in is the one served"
    assert reloads >= 2


async def test_a_query_under_way_during_a_swap_is_answered_wholly_from_the_index_it_started_with(
    tmp_path: Path,
) -> None:
    """Each call waits 1.5 s before searching (the server's test-only delay), so it is still under way when the new
    index is swapped in and served: it answers from the old index all the same, and the next call from the new."""
    v1 = _base_dir(tmp_path, "v1", [(SWAP_NORM, SWAP_V1)])
    v2 = _base_dir(tmp_path, "v2", [(SWAP_NORM, SWAP_V2)])
    question = SWAP_QUESTIONS[0]
    old, new = _expected(v1)[question], _expected(v2)[question]
    assert old != new
    data = tmp_path / "data"
    data.mkdir()
    shutil.copyfile(index.index_path(v1), index.index_path(data))
    with serve(data, tmp_path / "serve.log", {TEST_DELAY_ENV: "1500"}) as server:

        async def under_way(session: ClientSession) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            call = asyncio.create_task(_results(session, question))
            await asyncio.sleep(0.2)
            await asyncio.to_thread(_swap_in, v2, data)
            await asyncio.to_thread(server.wait_generation, index.current_generation(v2) or "")
            assert not call.done(), "the call ended before the swap: the test shows nothing"
            return await call, await _results(session, question)

        during, after = await _session(server.url, under_way)
    assert during == old
    assert after == new


async def test_an_index_that_cannot_be_loaded_leaves_the_old_one_served_with_one_error_line(tmp_path: Path) -> None:
    """A file at the index path that is not an index (a broken copy, a full disk) is logged once, not at every
    check, and the server goes on answering from the index it had; the next good index is served again."""
    data = _base_dir(tmp_path, "data", [(SWAP_NORM, SWAP_V1)])
    v2 = _base_dir(tmp_path, "v2", [(SWAP_NORM, SWAP_V2)])
    expected = _expected(data)
    good = index.current_generation(data)
    with serve(data, tmp_path / "serve.log") as server:
        broken = data / ".broken.tmp"
        broken.write_bytes(b"this is not an SQLite database\n" * 200)
        os.replace(broken, index.index_path(data))
        deadline = time.monotonic() + 15
        while "could not be loaded" not in server.log_text():
            assert time.monotonic() < deadline, "the server never tried the changed file"
            await asyncio.sleep(0.05)
        await asyncio.sleep(4.5)  # two of the server's backstop checks (every 2 s): still one line
        errors = [line for line in server.log_text().splitlines() if "could not be loaded" in line]
        assert len(errors) == 1, errors
        assert f"still serving generation {good}" in errors[0]
        assert server.health()["generation"] == good
        for question in SWAP_QUESTIONS:
            assert await _session(server.url, lambda s, q=question: _results(s, q)) == expected[question]

        _swap_in(v2, data)
        server.wait_generation(index.current_generation(v2) or "")
        assert await _session(server.url, lambda s: _results(s, SWAP_QUESTIONS[0])) == _expected(v2)[SWAP_QUESTIONS[0]]


async def test_a_server_that_started_on_a_broken_index_serves_the_next_good_one(tmp_path: Path) -> None:
    """A server whose index could not be loaded at start (health 503, "error") serves an index swapped in later,
    without a restart, and does not log the start's failure a second time."""
    good = _base_dir(tmp_path, "good")
    data = tmp_path / "data"
    data.mkdir()
    index.index_path(data).write_bytes(b"not an index\n" * 100)
    with serve(data, tmp_path / "serve.log", ready=503) as server:
        await asyncio.sleep(2.5)  # one backstop check (every 2 s) on the broken file
        _swap_in(good, data)
        server.wait_generation(index.current_generation(good) or "")
        assert server.health()["articles"] == len(BASE_TEXTS)
        assert server.log_text().count("could not be loaded") == 1, server.log_text()


# --- what the CLI says ---------------------------------------------------------------------------------------------


def test_import_says_promptly_that_no_running_server_has_taken_it_when_none_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No server runs on this data dir (one killed without cleaning up left its record behind): `import` does not
    wait out its --wait, it says at once, in one line, that no running server has the change yet."""
    data = _base_dir(tmp_path, "data")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    served.record_served(data, "gone", "1-00000000")
    record = data / served.SERVED_DIR / "gone.json"
    record.write_text(record.read_text().replace(f'"pid": {os.getpid()}', f'"pid": {int(dead.stdout)}'))
    assert served.served_records(data) == []

    law = norm_jsonl(tmp_path / "otra.jsonl", "Ley sintética 2 de 2098", ["Los loros de prueba hablan en verso."])
    started = time.monotonic()
    assert cli.main(["import", str(law), "--wait", "600", "--data-dir", str(data)]) == 0
    assert time.monotonic() - started < 60, "import waited for a server that does not run"
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "no running search server has taken it yet; a server picks it up on its own, or when it starts"


def test_a_server_still_on_the_old_generation_makes_import_wait_then_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A live server's record that never reaches the new generation: import waits --wait seconds, then says how
    many running servers have not taken it; a record of a later generation counts as serving it."""
    data = _base_dir(tmp_path, "data")
    served.record_served(data, "slow", index.current_generation(data) or "")  # this process: alive
    assert cli.main(["remove", BASE_NORM, "--wait", "0.3", "--data-dir", str(data)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 of 1 running search servers have not taken it yet")

    written = index.current_generation(data) or ""
    assert served.serves(written, written)
    later = f"{index.generation_seq(written) + 1}-ffffffff"
    assert served.serves(later, written) and not served.serves(f"{index.generation_seq(written)}-ffffffff", written)
    served.record_served(data, "slow", later)
    uptake = served.wait_until_served(data, written, timeout_s=0)
    assert (uptake.running, uptake.serving) == (1, 1) and uptake.after_s is not None


def test_every_write_gives_the_index_a_later_generation(tmp_path: Path) -> None:
    """The generation a server reports moves forward with each import and remove, so `import` can tell a server
    that serves its write (or a later one) from one that does not."""
    data = _base_dir(tmp_path, "data")
    first = index.current_generation(data) or ""
    import_norms(norm_jsonl(tmp_path / "x.jsonl", "Ley sintética 3 de 2098", ["Los osos de prueba comen miel."]), data)
    second = index.current_generation(data) or ""
    assert index.generation_seq(second) == index.generation_seq(first) + 1
    assert index.load(data).generation == second
    assert index.load(data).identity == index.file_identity(data)


def test_imports_run_at_the_same_time_both_end_up_in_the_index(tmp_path: Path) -> None:
    """Two `import`s started together on one data dir (two operators, or a norms folder at a server's start and a
    CLI import) are written one after the other, the second from the first's result: neither norm is lost, so the
    last index a server picks up holds both."""
    data = _base_dir(tmp_path, "data")
    laws = [
        norm_jsonl(tmp_path / f"law{i}.jsonl", f"Ley sintética {i} de 2096", [f"Los gatos de prueba número {i}."])
        for i in (1, 2)
    ]
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "panama_law", "import", str(law), "--wait", "0", "--data-dir", str(data)],
            cwd=REPO_ROOT,
            env=_server_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for law in laws
    ]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    names = {n.name for n in index.list_norms(data)}
    assert names == {BASE_NORM, "Ley sintética 1 de 2096", "Ley sintética 2 de 2096"}
    assert index.generation_seq(index.current_generation(data) or "") == 3


def test_a_folder_import_reports_the_uptake_once_and_an_unchanged_folder_reports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`import FOLDER` writes the index once per changed file; its uptake line comes once, after the files' lines.
    Run again on the same folder it writes nothing, so it has nothing to report about running servers."""
    data = _base_dir(tmp_path, "data")
    folder = tmp_path / "normas"
    folder.mkdir()
    norm_jsonl(folder / "a.jsonl", "Ley sintética 4 de 2096", ["Los patos de prueba nadan en fila."])
    norm_jsonl(folder / "b.jsonl", "Ley sintética 5 de 2096", ["Las ranas de prueba saltan de noche."])
    served.record_served(data, "old", index.current_generation(data) or "")  # a live server (this process) lagging

    assert cli.main(["import", str(folder), "--wait", "0.2", "--data-dir", str(data)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["a.jsonl: imported (Ley sintética 4 de 2096)", "b.jsonl: imported (Ley sintética 5 de 2096)"]
    assert len(lines) == 3 and lines[2].startswith("1 of 1 running search servers have not taken it yet")

    served.record_served(data, "old", index.current_generation(data) or "")
    assert cli.main(["import", str(folder), "--wait", "0.2", "--data-dir", str(data)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "a.jsonl: unchanged (Ley sintética 4 de 2096)",
        "b.jsonl: unchanged (Ley sintética 5 de 2096)",
    ]
