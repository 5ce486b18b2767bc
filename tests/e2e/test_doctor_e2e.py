"""`python -m agent doctor` against a live stack, each broken setting, and a clean Ctrl-C of `make run`.

The doctor's LiveKit, dispatch and MCP checks make real calls, so they are tested against the real
livekit-server and search server of the module's stack; the Ctrl-C test runs `python -m agent run` (what
`make run` runs) as a subprocess, stops it with SIGINT as a terminal would, and reads every log.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from agent.doctor import CheckResult, run_checks
from agent.settings import Settings
from panama_law.index import disk as law_index
from tests import constitution
from tests.e2e.conftest import REPO_ROOT, E2EStack, livekit_port
from tests.fake_realtime_endpoint import FakeRealtimeEndpoint
from tests.ports import free_port

pytestmark = pytest.mark.e2e


def stack_settings(e2e_stack: E2EStack, **overrides: Any) -> Settings:
    env = {k: v for k, v in e2e_stack.stack.common_env().items() if k.isupper()}
    return Settings(**{**env, **overrides})


async def checks(e2e_stack: E2EStack, **overrides: Any) -> dict[str, CheckResult]:
    results = await run_checks(lambda: stack_settings(e2e_stack, **overrides))
    return {r.name: r for r in results}


def test_doctor_passes_against_the_running_stack(e2e_stack: E2EStack) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent", "doctor"],
        env=e2e_stack.stack.common_env(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("settings", "livekit", "agent dispatch", "mcp server", "ledger", "resume tokens", "page build"):
        assert any(line.startswith(name) and " PASS " in line for line in done.stdout.splitlines()), done.stdout
    assert "SKIP" in done.stdout and "rehearsal mode" in done.stdout  # no key to check in rehearsal


@pytest.mark.parametrize(
    ("overrides", "failing", "fix_names"),
    [
        ({"LIVEKIT_API_SECRET": "x" * 40}, "livekit", "LIVEKIT_API_SECRET"),
        ({"LIVEKIT_API_KEY": "nobody"}, "agent dispatch", "LIVEKIT_API_KEY"),
        ({"LEXVOZ_MCP_TOKEN": "wrong-token"}, "mcp server", "LEXVOZ_MCP_TOKEN"),
        ({"LEXVOZ_WEB_DIST": "/nonexistent/dist"}, "page build", "make web"),
        ({"LEXVOZ_LEDGER_PATH": "/proc/lexvoz/ledger.sqlite3"}, "ledger", "LEXVOZ_LEDGER_PATH"),
    ],
)
async def test_each_broken_setting_fails_with_its_fix(
    e2e_stack: E2EStack, overrides: dict[str, str], failing: str, fix_names: str
) -> None:
    results = await checks(e2e_stack, **overrides)
    assert results[failing].status == "fail", results[failing]
    assert fix_names in results[failing].fix
    assert results["settings"].status == "pass"


async def test_an_unreachable_livekit_fails_naming_the_url(e2e_stack: E2EStack) -> None:
    results = await checks(e2e_stack, LIVEKIT_URL=f"ws://127.0.0.1:{free_port()}")
    assert results["livekit"].status == "fail" and "LIVEKIT_URL" in results["livekit"].fix


async def test_a_rejected_openai_key_fails_in_live_mode(e2e_stack: E2EStack) -> None:
    async with FakeRealtimeEndpoint(refuse=401) as endpoint:
        results = await checks(
            e2e_stack, LEXVOZ_REHEARSAL="0", OPENAI_API_KEY="sk-wrong", OPENAI_BASE_URL=endpoint.base_url
        )
    assert results["openai"].status == "fail" and "OPENAI_API_KEY" in results["openai"].fix
    assert results["livekit"].status == "pass"


def test_ctrl_c_stops_make_run_without_errors_or_leftovers(e2e_stack: E2EStack, tmp_path: Path) -> None:
    data_dir, log_dir = tmp_path / "data", tmp_path / "log"
    data_dir.mkdir()
    shutil.copy2(law_index.index_path(e2e_stack.stack.opts.data_dir), law_index.index_path(data_dir))
    args = [
        sys.executable, "-m", "agent", "run",
        "--source", str(constitution.require()), "--data-dir", str(data_dir), "--log-dir", str(log_dir),
        "--livekit-port", str(livekit_port(e2e_stack.stack.opts.livekit_port + 1)),
        "--search-port", str(free_port()), "--web-port", str(free_port()), "--standin-port", str(free_port()),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["LEXVOZ_LEDGER_PATH"] = str(tmp_path / "ledger.sqlite3")
    runner = subprocess.Popen(
        args, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    watchdog = threading.Timer(240, runner.kill)  # a hung start fails the test instead of hanging it
    watchdog.start()
    output: list[str] = []
    try:
        assert runner.stdout is not None
        for line in runner.stdout:  # blocks on the pipe: wakes on each line
            output.append(line)
            if "Lexvoz is ready" in line:
                break
        assert any("Lexvoz is ready" in line for line in output), "".join(output)
        processes = psutil.Process(runner.pid).children(recursive=True)
        assert len(processes) >= 5  # livekit-server, search, stand-in, web, worker (+ its job processes)

        os.killpg(runner.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends to the foreground group
        output.append(runner.stdout.read())
        assert runner.wait(60) == 0, "".join(output)
    finally:
        watchdog.cancel()
        if runner.poll() is None:
            runner.kill()
    _, alive = psutil.wait_procs(processes, timeout=10)
    assert not alive, f"left behind: {[p.pid for p in alive]}"
    text = "".join(output)
    assert "ERROR" not in text and "Traceback" not in text, text
    for log in sorted(log_dir.glob("*.log")):
        content = log.read_text(errors="replace")
        errors = [line for line in content.splitlines() if "ERROR" in line or "Traceback" in line]
        assert not errors, f"{log.name}: {errors[:3]}"
