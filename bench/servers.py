"""Waiting for a server a benchmark started: shared by the benchmarks that run `python -m panama_law serve`."""

from __future__ import annotations

import subprocess
import time

import httpx


def wait_healthy(proc: subprocess.Popen[bytes], health_url: str, *, what: str, timeout_s: float = 600.0) -> None:
    """Return once `health_url` answers 200; stop `proc` and raise naming `what` if it exits or never does.

    Ten minutes by default because a first start may build and embed an index on a busy two-core host."""
    started = time.perf_counter()
    while True:
        try:
            if httpx.get(health_url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.perf_counter() - started > timeout_s:
            proc.terminate()
            raise RuntimeError(f"{what} did not become healthy")
        time.sleep(0.05)
