"""Keyed fingerprints of queries for the search server's logs.

Why keyed: a plain hash of a question can be reversed by hashing guesses (a cédula has a few million
values), so the log line would still give the person away. An HMAC-SHA256 with a secret that only this
server holds keeps "same question, same fingerprint" for reading logs and loses the guess.

The search server is a separate program from the worker and does not import it, so it keeps its own key:
32 random bytes created on first run in its data folder (or PANAMA_LAW_DIGEST_KEY_PATH), owner-only, never
logged. A key file others can read is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

KEY_BYTES = 32


class FingerprintKeyError(RuntimeError):
    """The key file cannot be used (readable by others, or malformed)."""


def load_or_create_key(path: Path) -> bytes:
    """Read the key at `path`, creating it atomically with mode 0600 (folder 0700) if it is absent."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(secrets.token_hex(KEY_BYTES) + "\n")
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)  # atomic: a concurrent first run reads the winner's key
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise FingerprintKeyError(f"key file {path} is readable by others (mode {stat.S_IMODE(mode):o}); chmod 600 it")
    try:
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except ValueError:
        raise FingerprintKeyError(f"key file {path} is not hex") from None
    if len(key) < 16:
        raise FingerprintKeyError(f"key file {path} is too short")
    return key


class Fingerprinter:
    """`fingerprint(query)`: a 12-hex-char HMAC-SHA256 of the query under this server's key."""

    def __init__(self, key: bytes | None = None) -> None:
        # No key given (tests, embedded use): a random one for this process, still never a plain hash.
        self._key = key if key is not None else secrets.token_bytes(KEY_BYTES)

    def __call__(self, query: str) -> str:
        return hmac.new(self._key, query.encode("utf-8"), hashlib.sha256).hexdigest()[:12]
