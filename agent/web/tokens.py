"""Who may join which room: fresh rooms and identities, LiveKit join tokens, and resume tokens.

Why the caller never names the room: a token for any room name the caller asked for let a second browser
join a live conversation, hear the microphone and write into the chat. Every session now gets a fresh room
name with 128 random bits, which nobody can guess, and the only way back into a room is a resume token:

- signed by this service (HMAC-SHA256 under a key derived from the LiveKit API secret, so every replica
  of the service sharing that secret accepts it, and it is useless as a LiveKit token);
- bound to one room and one identity, short-lived (`LEXVOZ_RESUME_TTL_S`), and single-use: a rejoin
  spends it and hands out the next one, so a copied token is worthless once the page has used it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from datetime import timedelta
from typing import Any, Final

import jwt
from livekit import api

from agent.settings import Settings

ROOM_PREFIX: Final = "lexvoz-"
IDENTITY_PREFIX: Final = "usuario-"
# LiveKit refreshes the token of a connected participant itself, so the one we hand out only has to
# last until the browser joins; 15 minutes is the ceiling whatever the settings say.
MAX_TOKEN_TTL_S: Final = 900
RESUME_AUDIENCE: Final = "lexvoz-resume"
_RESUME_KEY_LABEL: Final = b"lexvoz resume token v1"
# Spent resume tokens are remembered until they expire; the table is bounded all the same.
MAX_SPENT_TOKENS: Final = 100_000


class ResumeError(Exception):
    """A resume token that cannot be used; the message is Spanish, for the page."""


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

    def __init__(self, settings: Settings, *, clock: Any = time.time) -> None:
        secret = settings.livekit_api_secret.get_secret_value().encode("utf-8")
        self._key = hmac.new(secret, _RESUME_KEY_LABEL, hashlib.sha256).digest()
        self._ttl_s = settings.resume_ttl_s
        self._clock = clock
        self._spent: OrderedDict[str, float] = OrderedDict()  # jti -> expiry, oldest first

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

    def spend(self, token: str) -> tuple[str, str]:
        """Check `token` and mark it used; returns (room, identity). Raises ResumeError otherwise."""
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
        self._forget_expired()
        if jti in self._spent:
            raise ResumeError("esta sesión ya se reanudó; empiece una nueva")
        self._spent[str(jti)] = float(claims["exp"])
        while len(self._spent) > MAX_SPENT_TOKENS:
            self._spent.popitem(last=False)
        return str(room), str(identity)

    def _forget_expired(self) -> None:
        now = self._clock()
        for jti, exp in list(self._spent.items()):
            if exp > now:
                break
            del self._spent[jti]
