"""Who may join which room: fresh rooms and identities, LiveKit join tokens, and resume tokens.

Why the caller never names the room: a token for any room name the caller asked for let a second browser
join a live conversation, hear the microphone and write into the chat. Every session now gets a fresh room
name with 128 random bits, which nobody can guess, and the only way back into a room is a resume token:

- signed by this service (HMAC-SHA256 under a key derived from the LiveKit API secret, so every replica
  of the service sharing that secret accepts it, and it is useless as a LiveKit token);
- bound to one room and one identity, short-lived (`LEXVOZ_RESUME_TTL_S`), and single-use: a rejoin
  spends it and hands out the next one, so a copied token is worthless once the page has used it.

Single-use holds across restarts and replicas: a spent token's id is written to a store every replica
shares (`spent`), and when that store cannot be reached a resume is refused with 503 rather than accepted
on trust; a new session, which spends nothing, still works.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from datetime import timedelta
from typing import Any, Final

import jwt
from aiohttp import web
from livekit import api

from agent.settings import Settings
from agent.web.spent import SpentStoreUnavailable, SpentTokens

ROOM_PREFIX: Final = "lexvoz-"
IDENTITY_PREFIX: Final = "usuario-"
# LiveKit refreshes the token of a connected participant itself, so the one we hand out only has to
# last until the browser joins; 15 minutes is the ceiling whatever the settings say.
MAX_TOKEN_TTL_S: Final = 900
RESUME_AUDIENCE: Final = "lexvoz-resume"
_RESUME_KEY_LABEL: Final = b"lexvoz resume token v1"
STORE_DOWN_MESSAGE: Final = "no se puede reanudar la sesión en este momento; inténtelo de nuevo o empiece una nueva"

log = logging.getLogger("lexvoz.web")


class ResumeError(Exception):
    """A resume token that cannot be used; the message is Spanish, for the page."""


class ResumeUnavailable(web.HTTPServiceUnavailable):
    """503: whether the token was already spent cannot be checked now, so the resume is refused."""

    def __init__(self) -> None:
        super().__init__(reason=STORE_DOWN_MESSAGE)


def new_room_name() -> str:
    """A fresh room for one conversation: 128 random bits, so no one can guess a live room's name."""
    return f"{ROOM_PREFIX}{secrets.token_hex(16)}"


def new_identity() -> str:
    """A throwaway participant identity; we keep no user accounts."""
    return f"{IDENTITY_PREFIX}{secrets.token_hex(8)}"


def public_url(settings: Settings) -> str:
    """The LiveKit URL the browser connects to, which may differ from the one the worker uses."""
    return settings.public_livekit_url or settings.livekit_url


def mint_token(settings: Settings, *, room: str, identity: str) -> str:
    """Sign a join token for exactly one room: microphone and data (chat) only, and our agent dispatched.

    Explicit dispatch by name means the worker only joins rooms that this service opened for it.
    """
    ttl_s = min(settings.token_ttl_s, MAX_TOKEN_TTL_S)
    grants = api.VideoGrants(
        room_join=True,
        room=room,
        can_publish=True,
        can_publish_sources=["microphone"],
        can_publish_data=True,
        can_subscribe=True,
    )
    return (
        api.AccessToken(settings.livekit_api_key, settings.livekit_api_secret.get_secret_value())
        .with_identity(identity)
        .with_name("Usuario")
        .with_kind("standard")
        .with_ttl(timedelta(seconds=ttl_s))
        .with_grants(grants)
        .with_room_config(api.RoomConfiguration(agents=[api.RoomAgentDispatch(agent_name=settings.agent_name)]))
        .to_jwt()
    )


class ResumeTokens:
    """Issue and spend the resume tokens that let a reloaded page back into its own room, and only that."""

    def __init__(self, settings: Settings, *, clock: Any = time.time, spent: SpentTokens | None = None) -> None:
        secret = settings.livekit_api_secret.get_secret_value().encode("utf-8")
        self._key = hmac.new(secret, _RESUME_KEY_LABEL, hashlib.sha256).digest()
        self._ttl_s = settings.resume_ttl_s
        self._clock = clock
        self.spent = spent if spent is not None else SpentTokens.from_settings(settings, clock=clock)
        self._store_failing = False

    def issue(self, *, room: str, identity: str) -> str:
        now = int(self._clock())
        claims = {
            "aud": RESUME_AUDIENCE,
            "room": room,
            "sub": identity,
            "iat": now,
            "exp": now + self._ttl_s,
            "jti": secrets.token_urlsafe(16),
        }
        return jwt.encode(claims, self._key, algorithm="HS256")

    @property
    def ttl_s(self) -> int:
        """How long a token issued now is accepted (`LEXVOZ_RESUME_TTL_S`); the page renews at half of it."""
        return self._ttl_s

    def holder(self, token: str) -> tuple[str, str]:
        """(room, identity) of a well-formed, unexpired token of ours, without spending it; ResumeError otherwise.
        Whether it was already spent is only known when it is (`spend`)."""
        room, identity, _jti, _exp = self._check(token)
        return room, identity

    async def spend(self, token: str) -> tuple[str, str]:
        """Check `token` and mark it used; returns (room, identity).

        Raises ResumeError for a token that is not valid (or already spent), ResumeUnavailable (503) when
        the spent-token store cannot say whether it was spent.
        """
        room, identity, jti, expires_at = self._check(token)
        try:
            fresh = await self.spent.spend(jti, expires_at)
        except SpentStoreUnavailable as exc:
            if not self._store_failing:
                log.warning(
                    "resumes refused: the spent-token store is unavailable (%s); new sessions still work."
                    " On PostgreSQL, check that `python -m agent ledger migrate` ran as the owner",
                    exc,
                )
            self._store_failing = True
            raise ResumeUnavailable() from None
        if self._store_failing:
            log.info("the spent-token store answers again: resumes are accepted")
            self._store_failing = False
        if not fresh:
            raise ResumeError("esta sesión ya se reanudó; empiece una nueva")
        return room, identity

    def _check(self, token: str) -> tuple[str, str, str, int]:
        """Signature, audience, expiry and prefixes; returns (room, identity, jti, exp)."""
        if not isinstance(token, str) or not token or len(token) > 1024:
            raise ResumeError("token de reanudación no válido")
        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=["HS256"],
                audience=RESUME_AUDIENCE,
                options={"require": ["exp", "iat", "sub", "jti", "aud"]},
                leeway=0,
            )
        except jwt.ExpiredSignatureError:
            raise ResumeError("la sesión anterior caducó; empiece una nueva") from None
        except jwt.PyJWTError:
            raise ResumeError("token de reanudación no válido") from None
        room, identity, jti = claims.get("room"), claims.get("sub"), claims.get("jti")
        if not all(isinstance(v, str) and v for v in (room, identity, jti)):
            raise ResumeError("token de reanudación no válido")
        if not str(room).startswith(ROOM_PREFIX) or not str(identity).startswith(IDENTITY_PREFIX):
            raise ResumeError("token de reanudación no válido")
        return str(room), str(identity), str(jti), int(claims["exp"])

    async def aclose(self) -> None:
        await self.spent.aclose()
