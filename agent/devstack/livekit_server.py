"""Find, build and start the real `livekit-server` binary for local runs and tests.

The binary is never committed: it is taken from `LEXVOZ_LIVEKIT_SERVER`, from `PATH`, or built once with
`go install` into a cache directory outside the repository and reused from there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from agent.settings import get_settings

VERSION = "v1.13.5"
GO_MODULE = "github.com/livekit/livekit-server/cmd/server"


class LiveKitServerMissing(RuntimeError):
    """No binary and no way to build one; the message says how to get it."""


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lexvoz" / f"livekit-server-{VERSION}"


def find_or_build(*, build: bool = True, log: bool = True) -> Path:
    explicit = os.environ.get("LEXVOZ_LIVEKIT_SERVER")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise LiveKitServerMissing(f"LEXVOZ_LIVEKIT_SERVER points at {explicit}, which does not exist")
        return path
    on_path = shutil.which("livekit-server")
    if on_path:
        return Path(on_path)
    cached = cache_dir() / "server"
    if cached.is_file():
        return cached
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").is_file() else None)
    if not build or go is None:
        raise LiveKitServerMissing(
            "livekit-server is not installed and Go is not available to build it.\n"
            "  Install Go (e.g. `apt-get install golang` or https://go.dev/dl/) and run `make livekit-server`,\n"
            f"  or install the binary yourself (livekit-server {VERSION}) and put it on PATH,\n"
            "  or use Docker: `docker compose up` runs the whole stack with the official image."
        )
    cache_dir().mkdir(parents=True, exist_ok=True)
    if log:
        print(
            f"building livekit-server {VERSION} with go install (first run only; several minutes on 2 cores) ...",
            file=sys.stderr,
        )
    env = {**os.environ, "GOBIN": str(cache_dir()), "CGO_ENABLED": os.environ.get("CGO_ENABLED") or "0"}
    _go_install_with_progress([go, "install", "-v", f"{GO_MODULE}@{VERSION}"], env, log=log)
    if not cached.is_file():
        raise LiveKitServerMissing(f"go install finished but {cached} is missing")
    return cached


PROGRESS_EVERY_S = 10.0


def _go_install_with_progress(cmd: list[str], env: dict[str, str], *, log: bool) -> None:
    """Run `go install -v`, turning its one-line-per-step output into a progress line every few seconds.

    A first build downloads ~250 modules and compiles ~1,000 packages: minutes of silence would look hung.
    """
    started = time.monotonic()
    last_report = started
    downloaded = compiled = 0
    tail: list[str] = []
    with subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("go: downloading"):
                downloaded += 1
            elif line.strip() and not line.startswith("go:"):
                compiled += 1
            tail = [*tail[-19:], line.rstrip()]
            now = time.monotonic()
            if log and now - last_report >= PROGRESS_EVERY_S:
                last_report = now
                print(
                    f"  livekit-server build: {downloaded} modules downloaded, {compiled} packages compiled,"
                    f" {now - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    if proc.returncode != 0:
        raise LiveKitServerMissing("go install failed:\n  " + "\n  ".join(tail))
    if log:
        print(f"  livekit-server built in {time.monotonic() - started:.0f} s", file=sys.stderr)


def start(
    *,
    api_key: str,
    api_secret: str,
    port: int = 7880,
    log_path: Path | None = None,
    extra_args: list[str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start livekit-server with our config on loopback; returns once it answers HTTP."""
    binary = find_or_build()
    env = {**os.environ, "LIVEKIT_KEYS": f"{api_key}: {api_secret}"}
    config = local_config(port)
    args = [str(binary), "--config", str(config), *(extra_args or [])]
    if log_path is not None:
        with open(log_path, "ab") as out:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    else:
        proc = subprocess.Popen(
            args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_http(f"http://127.0.0.1:{port}/", proc, timeout=30)
    finally:
        config.unlink(missing_ok=True)  # read at start; nothing to leave behind in the temp dir
    return proc


def media_ports(port: int) -> range:
    """The UDP ports livekit-server uses for media when signalling on `port` (livekit.yaml's for 7880)."""
    if port == 7880:
        return range(50_000, 50_101)
    start = 50_200 + (port % 50) * 40
    return range(start, start + 40)


def local_config(port: int = 7880, template: Path | None = None) -> Path:
    """livekit.yaml as run on a developer's machine: media on loopback only, on the given ports.

    livekit.yaml itself also serves the Docker image, where the container's own interface must carry
    media; here ICE is restricted to `lo`, so no test or local session ever sends traffic to another
    address of the machine. Other ports let tests run beside a `make run` stack without colliding.
    """
    text = (template or get_settings().livekit_config).read_text()
    udp = media_ports(port)
    text = re.sub(r"(?m)^port: \d+", f"port: {port}", text)
    text = re.sub(r"(?m)^(\s+)tcp_port: \d+", rf"\g<1>tcp_port: {port + 1}", text)
    text = re.sub(r"(?m)^(\s+)port_range_start: \d+", rf"\g<1>port_range_start: {udp.start}", text)
    text = re.sub(r"(?m)^(\s+)port_range_end: \d+", rf"\g<1>port_range_end: {udp.stop - 1}", text)
    text = re.sub(
        r"(?m)^rtc:\n", "rtc:\n  interfaces:\n    includes: [lo]\n  ips:\n    includes: [127.0.0.1/8]\n", text
    )
    fd, name = tempfile.mkstemp(prefix="lexvoz-livekit-", suffix=".yaml")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return Path(name)


class ReportedFailure(RuntimeError):
    """The service answered, and its answer says it will not become ready (no point waiting any longer)."""


def wait_http(
    url: str,
    proc: subprocess.Popen[bytes] | None = None,
    *,
    timeout: float = 30,
    ok_only: bool = False,
    failed: Callable[[bytes], bool] | None = None,
) -> None:
    """Return once `url` answers (below 500; exactly 200 with `ok_only`); fail early if `proc` exits, or with
    ReportedFailure as soon as `failed` says an error answer's body is final (a health check saying "error")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"exited with code {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200 or not ok_only:
                    return
        except urllib.error.HTTPError as exc:
            if failed is not None and failed(exc.read()):
                raise ReportedFailure(f"{url} answered {exc.code} and reports an error") from None
            if not ok_only and exc.code < 500:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def main(argv: list[str] | None = None) -> int:
    try:
        print(find_or_build())
    except LiveKitServerMissing as exc:
        print(f"lexvoz: {exc}", file=sys.stderr)
        return 1
    return 0
