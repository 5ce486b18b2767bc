"""A throwaway Redis for the cluster tests and the soak's cluster run: Debian's `redis-server`, loopback, no disk.

Never a system service: the server runs in a folder the caller owns, on a free 127.0.0.1 port, with persistence
off and protected mode on, and is stopped by the caller (`terminate` from `agent.devstack.processes`).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from agent.devstack.processes import terminate
from tests.ports import free_port

REDIS_START_S = 15.0
MISSING = "redis-server is not installed (apt-get install redis-server; `make test` does it)"


def why_unavailable() -> str | None:
    """Why Redis cannot be started here, or None when it can."""
    return None if shutil.which("redis-server") else MISSING


def _ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(data_dir: Path, log: Path, port: int | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """Start redis-server in `data_dir` (on `port`, else a free one), logging to `log`; returns the process and its
    port once it answers."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError(MISSING)
    port = port or free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir), "--save", ""]
    args += ["--appendonly", "no", "--protected-mode", "yes", "--logfile", str(log)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + REDIS_START_S
    while not _ready(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            terminate(proc)
            raise RuntimeError(f"redis-server did not start on port {port}")
        time.sleep(0.1)
    return proc, port
