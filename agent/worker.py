"""The LiveKit worker: `python -m livekit.agents start agent/worker.py [--dev]` finds `server` here.

Settings are read when this module is imported, so a bad deployment fails before it registers with
LiveKit, with one line naming the variable.
"""

from __future__ import annotations

import logging
import sys

from livekit.agents import AgentServer, JobContext, JobProcess
from livekit.plugins import silero

from .conversation import start_conversation
from .settings import Settings, SettingsError, get_settings

logger = logging.getLogger("lexvoz.worker")


def _load_settings() -> Settings:
    try:
        settings = get_settings()
    except SettingsError as exc:
        print(f"lexvoz: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if not settings.rehearsal and settings.openai_api_key is None:
        print(
            "lexvoz: missing setting OPENAI_API_KEY (or set LEXVOZ_REHEARSAL=1 for the local stand-in)", file=sys.stderr
        )
        raise SystemExit(2)
    return settings


settings = _load_settings()


def prewarm(proc: JobProcess) -> None:
    """Load Silero once per process; the model ships in the wheel, so this works offline."""
    proc.userdata["vad"] = silero.VAD.load()


server = AgentServer(
    ws_url=settings.livekit_url,
    api_key=settings.livekit_api_key,
    api_secret=settings.livekit_api_secret.get_secret_value(),
    prometheus_port=settings.prometheus_port,
    setup_fnc=prewarm,
)


@server.rtc_session(agent_name=settings.agent_name)
async def entrypoint(ctx: JobContext) -> None:
    await ctx.connect()
    await start_conversation(ctx.room, settings, vad=ctx.proc.userdata.get("vad"))
