"""A throwaway PostgreSQL for the ledger tests: Debian's server binaries, a temporary folder, loopback.

Never a system service: `initdb` writes a cluster into a fresh temporary folder, `pg_ctl` starts it on a
free 127.0.0.1 port with its unix socket inside that folder, and everything is removed afterwards.
PostgreSQL refuses to run as root, so when the tests run as root the server runs as `nobody` (through
`setpriv`), which owns the folder. Trust authentication is safe here: the server listens on loopback
only, for the length of the test run.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.ports import free_port

PG_ROOT = Path("/usr/lib/postgresql")
SUPERUSER = "lexvoz"
UNPRIVILEGED = "nobody"


def find_pg_bin() -> Path | None:
    """The newest `/usr/lib/postgresql/NN/bin` holding initdb, pg_ctl and postgres."""
    found: list[tuple[int, Path]] = []
    for candidate in PG_ROOT.glob("*/bin"):
        if re.fullmatch(r"\d+", candidate.parent.name) and all(
            (candidate / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")
        ):
            found.append((int(candidate.parent.name), candidate))
    return max(found)[1] if found else None


def why_unavailable() -> str | None:
    """One reason the tests cannot start PostgreSQL here, or None when they can."""
    if find_pg_bin() is None:
        return f"no PostgreSQL server under {PG_ROOT}/NN/bin: install Debian's postgresql package (.ci/run does)"
    if os.getuid() == 0:
        if shutil.which("setpriv") is None:
            return "running as root and setpriv (util-linux) is missing: PostgreSQL cannot drop to an unprivileged user"
        try:
            pwd.getpwnam(UNPRIVILEGED)
        except KeyError:
            return f"running as root and there is no {UNPRIVILEGED!r} user for PostgreSQL to run as"
    return None


class PostgresServer:
    """One cluster in a temporary folder; `start`, `stop` and `url()` for a database in it."""

    def __init__(self) -> None:
        bin_dir = find_pg_bin()
        if bin_dir is None:
            raise RuntimeError(why_unavailable() or "no PostgreSQL")
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="lexvoz-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "server.log"
        self.port = free_port()
        self._prefix: list[str] = []
        if os.getuid() == 0:
            user = pwd.getpwnam(UNPRIVILEGED)
            self._prefix = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        )
        self._run("mkdir", "-m", "0700", str(self.socket_dir))

    def _run(self, *args: str) -> None:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C", "HOME": str(self.root)}
        done = subprocess.run([*self._prefix, *args], capture_output=True, text=True, env=env, cwd=self.root)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr[-2000:]}\n{log}")

    def start(self) -> None:
        """Start and wait until it accepts connections (`pg_ctl -w` waits on the server, not a clock)."""
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.socket_dir}"
            " -c fsync=off -c full_page_writes=off -c max_connections=40"
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def cleanup(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
