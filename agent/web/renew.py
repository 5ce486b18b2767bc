"""`POST /api/session/renew`: a conversation in progress trades its resume token for a fresh one.

Why: a resume token is accepted for `LEXVOZ_RESUME_TTL_S` (10 minutes by default) from when it was issued, and
the page used to get one only when it joined. A conversation longer than that could no longer return to its
room: when livekit-server restarted under it, the page's rejoin (App.tsx) was refused and opened a fresh room,
where a new agent greeted the person from the start; a reload did the same. The page now renews its token at
half its life while it is in the room, so the token it holds is always fresh.

Who may renew: the holder of a valid resume token whose identity is in the token's room right now, by
livekit-server's participant list. A copy of a token from a tab that has left its room cannot be kept alive,
and a tab that left cannot stretch its window to come back. A renewal spends the old token, as a resume does
(single use, in the store every replica shares), and returns the next one for the same room and identity. It
mints no LiveKit token and admits nothing, so it is not counted against the service's caps; it takes from the
client's bucket of in-conversation requests (the one `POST /api/agent` uses), not from its new-session bucket.

Answers: 200 `{"resume": T, "resume_ttl_s": N}`; 400 for a body other than `{"resume": "<token>"}`; 401 for a
token that is malformed, expired or already spent (the page forgets it); 404 when the holder is not in the room
(the token is not spent); 429 for the client's limit; 503 when livekit-server or the spent-token store does not
answer (the token is not spent; the page tries again later).
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from aiohttp import web
from livekit import api

from agent.web.dispatch import AGENTS_KEY, in_conversation_refusal
from agent.web.metrics import refused
from agent.web.session import (
    NO_STORE,
    RESUME_KEY,
    SETTINGS_KEY,
    THROTTLE_KEY,
    RequestError,
    json_response,
    peer_address,
    read_json_object,
)
from agent.web.tokens import ResumeError

log = logging.getLogger("lexvoz.web")

RETRY_AFTER_S = 30


def _token(body: dict[str, Any]) -> str:
    token = body.get("resume")
    if set(body) != {"resume"} or not isinstance(token, str):
        raise RequestError(400, 'solicitud no válida: se espera {"resume": "<token>"}')
    return token


async def renew_resume(request: web.Request) -> web.Response:
    """`POST /api/session/renew` with `{"resume": T}`: the next resume token of a person still in T's room."""
    if (refusal := await in_conversation_refusal(request, "resume renewal", "renew-rate")) is not None:
        return refusal
    throttle = request.app[THROTTLE_KEY]
    peer = peer_address(request)
    token = _token(await read_json_object(request, request.app[SETTINGS_KEY].web_body_timeout_s))
    tokens = request.app[RESUME_KEY]
    try:
        room, identity = tokens.holder(token)
    except ResumeError as exc:
        refused(request, "resume")
        throttle.warning("resume", "resume renewal refused (peer %s)", peer)
        return json_response({"error": str(exc)}, status=401, headers=NO_STORE)
    retry = {"Retry-After": str(RETRY_AFTER_S), **NO_STORE}
    agents = request.app[AGENTS_KEY]
    try:
        present = await agents.present(room, identity)
    except (api.TwirpError, aiohttp.ClientError, TimeoutError) as exc:
        refused(request, "livekit")
        throttle.warning("livekit", "resume renewal: LiveKit did not answer (%s)", type(exc).__name__)
        return json_response({"error": "no se pudo contactar con el servidor de salas"}, status=503, headers=retry)
    if not present:
        refused(request, "room")
        return json_response(
            {"error": "usted no está en la sala de esta sesión; no se puede renovar"}, status=404, headers=NO_STORE
        )
    try:
        await tokens.spend(token)  # 503 (ResumeUnavailable) when the store cannot say whether it was spent
    except ResumeError as exc:
        refused(request, "resume")
        throttle.warning("resume", "resume renewal refused: token already spent (peer %s)", peer)
        return json_response({"error": str(exc)}, status=401, headers=NO_STORE)
    log.info("resume renewed room=%s identity=%s peer=%s", room, identity, peer)
    return json_response(
        {"resume": tokens.issue(room=room, identity=identity), "resume_ttl_s": tokens.ttl_s}, headers=NO_STORE
    )
