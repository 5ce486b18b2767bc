"""The first `make run`: the search index is built in the foreground with its progress shown, or the run stops
within seconds with one line saying how to use a local copy; the search server's own failure is seen at once.

`python -m agent run` is what `make run` runs. These tests run it for real in a subprocess with an empty data
directory and the download pointed at loopback servers that refuse, never answer, or serve the pinned file, and
with `LEXVOZ_LIVEKIT_SERVER` pointing nowhere, so a run that gets past the build stops at livekit-server instead
of starting a whole stack on this shared machine.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent.devstack import livekit_server
from agent.devstack.first_run import LOCAL_COPY_HINT, FirstRunError, build_index_if_missing
from agent.devstack.stack import Stack, StackOptions, main, options_from_args
from agent.settings import Settings
from panama_law.index.disk import index_path
from panama_law.ingest import corpus
from tests import constitution
from tests.ports import free_port

STACK_VARIABLES = {
    "LEXVOZ_LIVEKIT_PORT": "livekit_port",
    "PANAMA_LAW_PORT": "search_port",
    "LEXVOZ_WEB_PORT": "web_port",
    "LEXVOZ_STANDIN_PORT": "standin_port",
    "PANAMA_LAW_DATA_DIR": "data_dir",
    "LEXVOZ_LOG_DIR": "log_dir",
}
FAIL_WITHIN_S = 10.0


# ---- loopback servers -----------------------------------------------------------------------------------------


@pytest.fixture
def refusing_url() -> Iterator[str]:
    """A bound port that does not listen: connecting is refused at once (held, so nobody else takes it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/constitucion_panama.json"


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A port that accepts connections (the kernel completes them) and never sends a byte."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/constitucion_panama.json"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(directory: Path) -> Iterator[str]:
    """A loopback HTTP server for the files of `directory`; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# ---- running `python -m agent run` ------------------------------------------------------------------------------


@dataclass
class Run:
    code: int
    out: str
    err: str
    seconds: float

    @property
    def text(self) -> str:
        return self.out + self.err


def _clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without any Lexvoz or search-server setting, on free ports and in `tmp_path`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEXVOZ_", "PANAMA_LAW_", "OPENAI_", "LIVEKIT_"))}
    env.update(
        LEXVOZ_LIVEKIT_PORT=str(free_port()),
        PANAMA_LAW_PORT=str(free_port()),
        LEXVOZ_WEB_PORT=str(free_port()),
        LEXVOZ_STANDIN_PORT=str(free_port()),
        PANAMA_LAW_DATA_DIR=str(tmp_path / "data"),
        LEXVOZ_LOG_DIR=str(tmp_path / "log"),
        LEXVOZ_LIVEKIT_SERVER=str(tmp_path / "no-livekit-server"),  # past the build, the run stops here
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def run_agent(tmp_path: Path, **extra: str) -> Run:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agent", "run"],
        cwd=tmp_path,  # no `.env` of the checkout
        env=_clean_env(tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=240,
    )
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that name `text` (every child of a run names its data directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


# ---- (a) no download possible: one line within seconds ----------------------------------------------------------


@pytest.mark.parametrize("server", ["refusing_url", "silent_url"])
def test_a_first_run_without_download_stops_within_seconds_with_one_line(
    tmp_path: Path, server: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(server)
    run = run_agent(tmp_path, PANAMA_LAW_SOURCE_URL=url)
    assert run.code != 0, run.text
    assert run.seconds < FAIL_WITHIN_S, f"took {run.seconds:.1f} s\n{run.text}"
    hint_lines = [line for line in run.text.splitlines() if LOCAL_COPY_HINT in line]
    assert len(hint_lines) == 1, run.text
    assert "download failed" in hint_lines[0]
    assert "Traceback" not in run.text
    assert not processes_mentioning(str(tmp_path))
    assert not index_path(tmp_path / "data").exists()


def test_ctrl_c_during_the_first_run_build_stops_it_and_everything_it_started(tmp_path: Path, silent_url: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "run"],
        cwd=tmp_path,
        env=_clean_env(tmp_path, PANAMA_LAW_SOURCE_URL=silent_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert "downloading the Constitution" in first, first
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err
    assert not processes_mentioning(str(tmp_path))


# ---- (b) the download works: progress, then the index, then the rest of the stack ------------------------------


def test_a_first_run_downloads_with_progress_builds_the_index_then_starts_the_stack(tmp_path: Path) -> None:
    source = constitution.require()
    with serving(source.parent) as base:
        run = run_agent(tmp_path, PANAMA_LAW_SOURCE_URL=f"{base}/{source.name}")
    lines = run.out.splitlines()
    assert any(re.search(r"downloading http://127\.0\.0\.1:\d+/\S+ \(\d+ kB\)$", line) for line in lines), run.out
    done = [i for i, line in enumerate(lines) if re.search(r"downloaded \d+ kB of \d+ kB \(100%\)", line)]
    assert done and lines[done[0]].endswith("building the search index …"), run.out
    assert any("index built at" in line for line in lines[done[0] :]), run.out
    assert index_path(tmp_path / "data").is_file()
    # Past the build the run went on to start the stack (and stopped at its first part, as the test asked).
    assert run.code == 1 and "LEXVOZ_LIVEKIT_SERVER" in run.err.strip().splitlines()[-1], run.text
    assert "Traceback" not in run.text
    assert not processes_mentioning(str(tmp_path))


def test_with_an_index_in_place_nothing_is_downloaded(tmp_path: Path, refusing_url: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    index_path(data).write_bytes(b"")  # only its presence counts here; the search server opens it
    out = io.StringIO()
    os.environ["PANAMA_LAW_SOURCE_URL"] = refusing_url
    try:
        assert build_index_if_missing(StackOptions(data_dir=data), out) is False
    finally:
        del os.environ["PANAMA_LAW_SOURCE_URL"]
    assert out.getvalue() == ""


def test_a_local_source_that_cannot_be_read_is_named_without_the_download_hint(tmp_path: Path) -> None:
    missing = tmp_path / "constitucion.json"
    with pytest.raises(FirstRunError) as info:
        build_index_if_missing(StackOptions(data_dir=tmp_path / "data", source=missing), io.StringIO())
    message = str(info.value)
    assert str(missing) in message and LOCAL_COPY_HINT not in message and "\n" not in message


def test_the_download_logs_bytes_and_percent_as_it_goes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "big.json").write_bytes(b"x" * 400_000)
    monkeypatch.setattr(corpus, "PROGRESS_EVERY_S", 0.0)  # every chunk, so the in-between lines show
    caplog.set_level(logging.INFO, logger="panama_law.ingest.corpus")
    with serving(tmp_path) as base:
        data = corpus.download(f"{base}/big.json")
    assert len(data) == 400_000
    messages = [r.getMessage() for r in caplog.records if r.name == "panama_law.ingest.corpus"]
    assert messages[0] == f"downloading {base}/big.json (400 kB)"
    percents = [int(m) for m in re.findall(r"of 400 kB \((\d+)%\)", "\n".join(messages[1:-1]))]
    assert percents and percents == sorted(percents) and percents[0] < 100
    assert messages[-1] == "downloaded 400 kB of 400 kB (100%); building the search index …"


def test_a_refused_download_is_one_line_naming_the_status(tmp_path: Path) -> None:
    with serving(tmp_path) as base, pytest.raises(corpus.CorpusError) as info:
        corpus.download(f"{base}/missing.json")
    assert str(info.value) == f"download failed: HTTP 404 File not found from {base}/missing.json"


# ---- (c) the search server says its index failed: the stack stops waiting at once -----------------------------


def test_the_stack_stops_waiting_when_the_search_health_says_error(tmp_path: Path, refusing_url: str) -> None:
    options = StackOptions(
        search_port=free_port(),
        data_dir=tmp_path / "data",
        log_dir=tmp_path / "log",
        search_env={"PANAMA_LAW_SOURCE_URL": refusing_url},
    )
    options.log_dir.mkdir()
    stale = (
        "2026-01-01 00:00:00,000 ERROR panama_law.serve.server: index could not be loaded: an earlier run's reason\n"
    )
    (options.log_dir / "search.log").write_text(stale)  # logs are appended to, run after run
    stack = Stack(options)
    started = time.monotonic()
    try:
        with pytest.raises(RuntimeError) as info:
            stack._start_search()
    finally:
        stack.stop()
    elapsed = time.monotonic() - started
    assert elapsed < 60, f"waited {elapsed:.0f} s (the search server reported its error after a few)"
    first = str(info.value).splitlines()[0]
    assert first.startswith("search did not start: index could not be loaded: download failed:"), first
    assert "Connection refused" in first and str(options.log_dir / "search.log") in first


class _Health(BaseHTTPRequestHandler):
    status = "loading"

    def do_GET(self) -> None:
        body = json.dumps({"status": self.status, "index_loaded": False}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize(("status", "raised"), [("error", livekit_server.ReportedFailure), ("loading", TimeoutError)])
def test_waiting_ends_on_a_reported_error_and_goes_on_while_loading(status: str, raised: type[Exception]) -> None:
    handler = type("Health", (_Health,), {"status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/healthz"
    try:
        with pytest.raises(raised):
            livekit_server.wait_http(
                url, timeout=1.5, ok_only=True, failed=lambda body: json.loads(body)["status"] == "error"
            )
    finally:
        server.shutdown()
        server.server_close()


# ---- `python -m agent run`'s defaults come from the environment ------------------------------------------------


@pytest.fixture
def stack_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.chdir(tmp_path)  # no `.env`
    for variable in (*STACK_VARIABLES, "PANAMA_LAW_SOURCE", "PANAMA_LAW_NORMS_DIR"):
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def test_the_run_options_come_from_the_environment_and_flags_win(stack_env: pytest.MonkeyPatch) -> None:
    values = {variable: str(7001 + i) for i, variable in enumerate(STACK_VARIABLES)}
    values.update(PANAMA_LAW_DATA_DIR="/srv/lexvoz/data", LEXVOZ_LOG_DIR="/srv/lexvoz/log")
    for variable, value in values.items():
        stack_env.setenv(variable, value)
    options = options_from_args([])
    for variable, field in STACK_VARIABLES.items():
        expected: object = Path(values[variable]) if field.endswith("_dir") else int(values[variable])
        assert getattr(options, field) == expected, variable
    flagged = options_from_args(["--web-port", "7999", "--data-dir", "elsewhere"])
    assert (flagged.web_port, flagged.data_dir, flagged.livekit_port) == (7999, Path("elsewhere"), 7001)


def test_empty_run_variables_keep_the_defaults(stack_env: pytest.MonkeyPatch) -> None:
    for variable in (*STACK_VARIABLES, "PANAMA_LAW_SOURCE", "PANAMA_LAW_NORMS_DIR"):
        stack_env.setenv(variable, "")
    options = options_from_args([])
    assert (options.livekit_port, options.search_port, options.web_port, options.standin_port) == (
        7880,
        8765,
        8080,
        8790,
    )
    assert (options.data_dir, options.log_dir, options.source, options.norms_dir) == (
        Path("data"),
        Path("var/log"),
        None,
        None,
    )


def test_the_help_names_every_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        options_from_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for variable in (*STACK_VARIABLES, "PANAMA_LAW_SOURCE", "PANAMA_LAW_NORMS_DIR"):
        assert f"env {variable}" in text


def test_a_bad_run_variable_is_one_line_naming_it(
    stack_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack_env.setenv("LEXVOZ_LIVEKIT_PORT", "seven")
    assert main([]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "LEXVOZ_LIVEKIT_PORT" in err


def test_a_blank_openai_key_means_rehearsal_as_the_worker_reads_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Rehearsal mode exactly when the worker's settings find no key: otherwise the worker refuses to start."""
    monkeypatch.chdir(tmp_path)  # no `.env`
    for value in ("", "  "):
        monkeypatch.setenv("OPENAI_API_KEY", value)
        assert Settings().openai_api_key is None
        assert Stack(StackOptions()).rehearsal is True
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert Stack(StackOptions()).rehearsal is False
