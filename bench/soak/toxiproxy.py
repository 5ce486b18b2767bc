"""Toxiproxy, Shopify's TCP proxy for fault injection, between the worker and the search server.

Why a real proxy: slowing the search server past the tool's deadline has to slow the bytes on the wire, the
way a congested link or a stalled peer does, without changing the server; toxiproxy adds latency (and resets)
per proxy over a small REST API and is made for exactly this. The binary is never committed: it is taken
from `LEXVOZ_TOXIPROXY_SERVER`, from `PATH`, or built once with `go install` into a cache outside the
repository, the way livekit-server is. Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import aiohttp

from agent.devstack.livekit_server import wait_http

VERSION = "v2.5.0"
GO_MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lexvoz" / f"toxiproxy-{VERSION}"


def find_or_build() -> Path:
    """The toxiproxy server binary; built once (about a minute, a few MB of modules) when none is found."""
    explicit = os.environ.get("LEXVOZ_TOXIPROXY_SERVER")
    if explicit:
        return Path(explicit)
    on_path = shutil.which("toxiproxy-server")
    if on_path:
        return Path(on_path)
    cached = cache_dir() / "server"
    if cached.is_file():
        return cached
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("toxiproxy-server is missing and Go is not available to build it")
    print(f"building toxiproxy {VERSION} with go install (first run only) ...", file=sys.stderr)
    env = {**os.environ, "GOBIN": str(cache_dir()), "CGO_ENABLED": "0"}
    subprocess.run([go, "install", f"{GO_MODULE}@{VERSION}"], env=env, check=True)
    return cached


class Toxiproxy:
    """One toxiproxy server and the proxies the soak makes on it."""

    def __init__(self, port: int, log: Path) -> None:
        self.port = port
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> subprocess.Popen[bytes]:
        binary = find_or_build()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(binary), "-host", "127.0.0.1", "-port", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_http(f"{self.api}/version", self.proc, timeout=20)
        return self.proc

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def create(self, name: str, listen_port: int, upstream_port: int) -> None:
        """A proxy from `listen_port` to `upstream_port` (before anything connects through it)."""
        body = {"name": name, "listen": f"127.0.0.1:{listen_port}", "upstream": f"127.0.0.1:{upstream_port}"}
        request = urllib.request.Request(
            f"{self.api}/proxies", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as resp:  # raises on 4xx/5xx
            resp.read()

    async def add_latency(self, http: aiohttp.ClientSession, proxy: str, latency_ms: int) -> None:
        """Every byte from the server to the worker waits `latency_ms` (both ways: a stalled link)."""
        for stream in ("downstream", "upstream"):
            body = {
                "name": f"slow_{stream}",
                "type": "latency",
                "stream": stream,
                "toxicity": 1.0,
                "attributes": {"latency": latency_ms, "jitter": 0},
            }
            async with http.post(f"{self.api}/proxies/{proxy}/toxics", json=body) as resp:
                if resp.status not in (200, 201):
                    raise RuntimeError(f"toxiproxy refused a toxic: {resp.status} {await resp.text()}")

    async def clear(self, http: aiohttp.ClientSession, proxy: str) -> None:
        async with http.get(f"{self.api}/proxies/{proxy}/toxics") as resp:
            toxics = await resp.json()
        for toxic in toxics:
            async with http.delete(f"{self.api}/proxies/{proxy}/toxics/{toxic['name']}") as resp:
                if resp.status not in (200, 204):
                    raise RuntimeError(f"toxiproxy did not remove {toxic['name']}: {resp.status}")
