"""Keyed digests of user text: how logs, traces and ledger rows about one question are joined.

Why keyed: a plain hash of a question can be undone by guessing. A Panamanian cédula has a few million
plausible values, so a sha256 prefix stored next to "[cédula]" gives the number back in seconds. An
HMAC-SHA256 with a secret that lives only on the server keeps the join (same text, same digest) and
loses the guess: without the key, the digest says nothing about the text.

The key is 32 random bytes in a file created on first run with owner-only permissions (0600, in a
directory created 0700), shared by every process of one deployment so their digests agree. It is
never logged, and a key file others can read is refused rather than silently trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import stat
import threading
import unicodedata
from pathlib import Path

__all__ = ["DigestKeyError", "configure", "load_or_create_key", "query_digest"]

logger = logging.getLogger("lexvoz.digest")

KEY_BYTES = 32
DIGEST_HEX_CHARS = 16

_lock = threading.Lock()
_key: bytes | None = None


class DigestKeyError(RuntimeError):
    """The key file cannot be used (unreadable, malformed, or readable by others)."""


def load_or_create_key(path: Path) -> bytes:
    """Read the key at `path`, creating it (atomically, 0600) if absent.

    Creation writes a private temporary file and hard-links it into place, so two processes starting at
    once never see a half-written key: the loser of the race reads the winner's file.
    """
    path = Path(path)
    if not path.exists():
        if not path.parent.exists():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(secrets.token_hex(KEY_BYTES) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise DigestKeyError(f"digest key {path} is readable by others (mode {stat.S_IMODE(mode):o}); chmod 600 it")
    text = path.read_text(encoding="ascii").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise DigestKeyError(f"digest key {path} is not hex") from None
    if len(key) < 16:
        raise DigestKeyError(f"digest key {path} is too short ({len(key)} bytes, need 16 or more)")
    return key


def configure(key: bytes | None) -> None:
    """Use `key` for every digest in this process (None: load lazily from the settings again)."""
    global _key
    if key is not None and len(key) < 16:
        raise DigestKeyError("digest key must be at least 16 bytes")
    with _lock:
        _key = key


def _current_key() -> bytes:
    global _key
    key = _key
    if key is not None:
        return key
    with _lock:
        if _key is None:
            _key = _load_configured_key()
        return _key


def _load_configured_key() -> bytes:
    """The settings' key file; if it is unusable, a temporary key for this process, never a plain hash.

    A digest is computed inside a conversation (a tool call's span, a ledger row), which must not fail
    because of a key file: the operator gets one error line naming the file, and digests stay keyed
    (they only stop matching other processes' until the file is fixed).
    """
    from agent.settings import get_settings

    path = get_settings().digest_key_file
    try:
        return load_or_create_key(path)
    except (DigestKeyError, OSError) as exc:
        logger.error("digest key unusable (%s); using a temporary key in this process", exc)
        return secrets.token_bytes(KEY_BYTES)


def _normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def query_digest(text: str) -> str:
    """A 16-hex-char HMAC-SHA256 of the normalized text (case, spacing and accents' encoding do not matter)."""
    mac = hmac.new(_current_key(), _normalize(text).encode("utf-8"), hashlib.sha256)
    return mac.hexdigest()[:DIGEST_HEX_CHARS]
