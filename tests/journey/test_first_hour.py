"""A new user's first hour, walked as they walk it: `make run`, the page, a law of their own added meanwhile, Ctrl-C.

What the user does, and what must hold at each step:
1. `make run` with no OpenAI key (rehearsal mode), the Constitution from a local file, and no index yet: it builds
   the index, starts everything and prints the page's address.
2. In Chromium, on that page: Start, a typed question, source cards citing the Constitution.
3. With the page still open, `python -m panama_law import FILE --norm NAME`: the same page's next question gets a
   card citing the new law, with nothing restarted.
4. Ctrl-C: everything stops, no process of the run is left, and no log line of the run says ERROR or carries a
   traceback.

Nothing is pre-built for it: the data folder starts empty, so the index build is part of the journey, and the
command is the literal `make run`, so what the Makefile does (the page build included) is what is tested. The
only differences from a person's terminal are free ports and a temporary data and log folder, passed through the
same environment variables a user would set.
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from panama_law.index import disk as law_index
from tests.e2e.browser import write_wav
from tests.e2e.conftest import livekit_port
from tests.ports import free_port

pytestmark = pytest.mark.journey

REPO_ROOT = Path(__file__).resolve().parents[2]
LAW_FILE = REPO_ROOT / "tests" / "fixtures" / "norms" / "ley_1_de_2030.txt"
LAW_NAME = "Ley 1 de 2030"
LAW_QUESTION = "¿Qué dice la ley sobre instalar colmenas de abejas en la azotea?"
CONSTITUTION_QUESTION = "¿cuál es el idioma oficial de panamá?"
CONSTITUTION_CITATION = "artículo 7"
ARTIFACTS = REPO_ROOT / "test-artifacts"

# Every process the run starts inherits this variable; after Ctrl-C none may be left that carries it.
RUN_MARKER = "LEXVOZ_JOURNEY_RUN"
# A first run builds the index (embedding every article) before anything else starts: minutes on a busy 2-core host.
READY_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 90.0
SCRIPT_TIMEOUT_S = 300.0
# A log line a user would read as something having gone wrong: a Python logging ERROR/CRITICAL (text or JSON
# formats), livekit-server's error level, or a traceback.
ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL)\b|\"level\": ?\"(error|ERROR|critical|CRITICAL)\"|Traceback \(most recent")


@dataclass
class Output:
    """The lines a process prints, collected by a thread, so a test can wait for one without blocking forever."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _new: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._new.put(line.rstrip("\n"))
        self._new.put(None)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first line from now on matching `pattern`; fails naming what was printed if it never comes."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._new.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                code = self.proc.wait()
                raise AssertionError(f"the process ended (code {code}) before printing /{pattern}/:\n{self}")
            if match := re.search(pattern, line):
                return match
        raise AssertionError(f"no line matching /{pattern}/ within {timeout:.0f} s:\n{self}")

    def __str__(self) -> str:
        return "\n".join(self.lines[-60:])


def _processes_with(marker: str) -> list[str]:
    """`pid command` of every live process whose environment carries `marker` (zombies have no environment)."""
    found = []
    needle = marker.encode()
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            if needle in (proc_dir / "environ").read_bytes().split(b"\0"):
                cmdline = (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{proc_dir.name} {cmdline.strip()}")
        except OSError:
            continue
    return found


def _kill_all_with(marker: str) -> None:
    for entry in _processes_with(marker):
        try:
            os.kill(int(entry.split()[0]), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _error_lines(output: Output, log_dir: Path) -> list[str]:
    hits = [f"make run: {line}" for line in output.lines if ERROR_LINE.search(line)]
    for log in sorted(log_dir.rglob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if ERROR_LINE.search(line):
                hits.append(f"{log.name}: {line}")
    return hits


@dataclass
class Run:
    """One `make run`, as the test started it."""

    proc: subprocess.Popen[str]
    output: Output
    env: dict[str, str]
    data_dir: Path
    log_dir: Path
    marker: str


@pytest.fixture
def make_run(tmp_path: Path, constitution_path: Path) -> Iterator[Run]:
    """`make run` in rehearsal mode on free ports with an empty data folder; whatever is left at the end is killed."""
    for tool in ("make", "node"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not on PATH; `make test` (and CI) install it")
    if not Path("/usr/bin/chromium").is_file():
        pytest.fail("Debian's chromium is not installed; `make test` installs it")
    data_dir, log_dir = tmp_path / "data", tmp_path / "log"
    run_id = secrets.token_hex(8)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MAKEFLAGS")}
    env.update(
        {
            "PANAMA_LAW_SOURCE": str(constitution_path),
            "PANAMA_LAW_DATA_DIR": str(data_dir),
            "PANAMA_LAW_PORT": str(free_port()),
            "LEXVOZ_LOG_DIR": str(log_dir),
            # The ledger and its digest key default to var/ in the checkout; a test leaves the checkout alone.
            "LEXVOZ_LEDGER_PATH": str(tmp_path / "ledger.sqlite3"),
            "LEXVOZ_WEB_PORT": str(free_port()),
            "LEXVOZ_LIVEKIT_PORT": str(livekit_port()),
            "LEXVOZ_STANDIN_PORT": str(free_port()),
            RUN_MARKER: run_id,
        }
    )
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Its own process group, like a terminal's foreground job: Ctrl-C is a SIGINT to that whole group.
        start_new_session=True,
    )
    run = Run(proc, Output(proc), env, data_dir, log_dir, f"{RUN_MARKER}={run_id}")
    try:
        yield run
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        _kill_all_with(run.marker)


def _browser(run: Run, url: str) -> subprocess.Popen[str]:
    env = {
        **{k: v for k, v in run.env.items() if k != RUN_MARKER},
        "LEXVOZ_E2E_URL": url,
        "LEXVOZ_E2E_OUT": str(ARTIFACTS),
        # Silence: Chromium's default fake microphone beeps, each beep is heard as speech, and a spoken turn
        # barges in on the typed questions this journey asks.
        "LEXVOZ_E2E_AUDIO": str(write_wav(run.log_dir.parent / "silence.wav", tone=False)),
        "LEXVOZ_E2E_TIMEOUT_MS": "60000",
        "LEXVOZ_E2E_QUESTION": CONSTITUTION_QUESTION,
        "LEXVOZ_E2E_EXPECT_CITATION": CONSTITUTION_CITATION,
        "LEXVOZ_E2E_LAW_QUESTION": LAW_QUESTION,
        "LEXVOZ_E2E_LAW_EXPECT_CITATION": LAW_NAME,
    }
    return subprocess.Popen(
        ["node", str(REPO_ROOT / "web" / "e2e" / "journey.mjs")],
        cwd=REPO_ROOT / "web",
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _import_law(run: Run) -> subprocess.CompletedProcess[str]:
    """What the user types in a second terminal while the stack runs."""
    return subprocess.run(
        [sys.executable, "-m", "panama_law", "import", str(LAW_FILE), "--norm", LAW_NAME],
        cwd=REPO_ROOT,
        env=run.env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_first_hour_of_a_new_user(make_run: Run) -> None:
    run = make_run
    assert not law_index.index_path(run.data_dir).exists(), "the journey starts with no index"

    run.output.wait_for(r"No search index in .* yet: building it from .*constitucion", READY_TIMEOUT_S)
    ready = run.output.wait_for(r"Lexvoz is ready: open (\S+) ", READY_TIMEOUT_S)
    built = law_index.index_path(run.data_dir).is_file()
    assert built, f"the first run built no index in the data folder:\n{run.output}"

    browser = _browser(run, ready.group(1))
    page = Output(browser)
    try:
        page.wait_for(r'^\{"step":"import"\}$', SCRIPT_TIMEOUT_S)
        imported = _import_law(run)
        assert imported.returncode == 0, f"import failed:\n{imported.stdout}\n{imported.stderr}"
        assert LAW_NAME in imported.stdout, imported.stdout
        # The user is told the running stack has taken the law, so they know no restart is needed.
        assert "the running search server now serves it" in imported.stdout, imported.stdout
        assert browser.stdin is not None
        browser.stdin.write("imported\n")
        browser.stdin.close()
        page.wait_for(r'^\{"scenario":"journey"', SCRIPT_TIMEOUT_S)
        browser.wait(30)
    finally:
        if browser.poll() is None:
            browser.kill()
            browser.wait(10)
    result = json.loads(page.lines[-1])
    stderr = browser.stderr.read() if browser.stderr else ""
    assert result.get("ok"), (
        f"the page's journey failed: {result.get('error')}\n{json.dumps(result, ensure_ascii=False)[:3000]}\n"
        f"{stderr[-2000:]}\n--- make run ---\n{run.output}"
    )

    # Ctrl-C, as the terminal sends it: SIGINT to the foreground job's whole process group.
    os.killpg(run.proc.pid, signal.SIGINT)
    try:
        run.proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`make run` was still running {STOP_TIMEOUT_S:.0f} s after Ctrl-C:\n{run.output}")
    time.sleep(0.5)  # the pump thread reads the last lines
    left = _processes_with(run.marker)
    assert not left, "processes of the run were left after Ctrl-C:\n" + "\n".join(left)
    errors = _error_lines(run.output, run.log_dir)
    assert not errors, "the run logged errors:\n" + "\n".join(errors[:40])
