"""The one check a metrics directory must pass, with nothing but the standard library.

Why a module of its own: prometheus_client writes its multiprocess files into PROMETHEUS_MULTIPROC_DIR as
soon as metrics are created, and livekit-agents creates some when it is imported, before the worker's code
runs. So `python -m agent start` checks an operator's directory here, before anything imports
prometheus_client or livekit-agents: a planted symbolic link gets no file written through it.
`agent.ops.metrics` uses the same check when it prepares the directory.
"""

from __future__ import annotations

import os
import stat

__all__ = ["MultiprocessDirError", "check_env_dir", "check_private_dir", "env_dir"]


class MultiprocessDirError(Exception):
    """PROMETHEUS_MULTIPROC_DIR cannot be used as a private directory: one line for the operator."""


def check_private_dir(path: str | os.PathLike[str]) -> None:
    """Refuse `path` unless it is a directory (not a symbolic link) of this user, not group/world-writable."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise MultiprocessDirError(f"PROMETHEUS_MULTIPROC_DIR {os.fspath(path)!r}: {exc.strerror}") from None
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a directory"
    elif info.st_uid != os.geteuid():
        problem = f"belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = f"is writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
    if problem:
        raise MultiprocessDirError(
            f"PROMETHEUS_MULTIPROC_DIR {os.fspath(path)!r} {problem}: use a directory only this user can"
            " write to, or unset it to get a private one per run"
        )


def env_dir() -> str | None:
    """The multiprocess directory named in the environment, under either name prometheus_client reads."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or None


def check_env_dir() -> None:
    """`check_private_dir` on PROMETHEUS_MULTIPROC_DIR when it is set and exists (the worker creates an absent
    one itself, owner-only); raises MultiprocessDirError."""
    path = env_dir()
    if path and os.path.lexists(path):
        check_private_dir(path)
