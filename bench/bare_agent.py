"""A bare livekit-agents agent: the yardstick `bench/load.py` and `bench/latency.py` hold Lexvoz against.

`python -m livekit.agents start bench/bare_agent.py` registers it with the livekit-server of `LIVEKIT_URL`
under the same agent name as the Lexvoz worker (`LEXVOZ_AGENT_NAME`), so the page service's
`POST /api/session` token dispatches it into the room exactly as it dispatches Lexvoz.

Why it exists: "what does Lexvoz cost per conversation" only means something beside "what does the framework
cost for the same conversation". So this agent runs the same Realtime plugin with the same model options
(model, voice, semantic VAD at low eagerness, Spanish transcription, the output-token cap) against the same
Realtime endpoint, greets the person as Lexvoz does (the conversation has the same shape: a greeting, then
questions answered aloud), and is otherwise livekit-agents' defaults: `AgentSession(llm=model)` and default room
options (transcripts synchronised with the audio, text input on `lk.chat`). By default it has NO tool, no MCP
gateway, no observers, no ledger, no metrics, no tracing; in rehearsal mode the stand-in therefore answers each
question with its fixed "no tool" sentence instead of searching.

With `BARE_AGENT_TOOL=1` in its environment it also has one function tool, under Lexvoz's tool's name (the
stand-in calls a tool only by that name), which answers at once and without I/O with three sources shaped and
sized like a search's. What a tool turn costs inside livekit-agents (the function call, the tool's output sent
back to the model, the reply asked for) is then in both agents' figures, and what `bench/latency.py` finds
between Lexvoz and this agent is Lexvoz's own: the gateway, the search server, the research session's checks
and messages.

What it shares with the Lexvoz worker is the deployment, not the conversation: the executor type, the warm
job runners and the job limit come from the same settings (`LEXVOZ_JOB_EXECUTOR`, `LEXVOZ_IDLE_PROCESSES`,
`LEXVOZ_MAX_JOBS`), and rooms are admitted the way the Lexvoz worker admits them (jobs counted against the
limit, load reported as that share scaled to livekit-server's target load). livekit-agents' own gate refuses
most of a burst of rooms on a fresh worker (research/capacity-history.md, "Rooms refused in a burst"), which
would make the baseline serve fewer people than Lexvoz and compare nothing. This module imports nothing of
`agent/` but the settings, so its processes carry none of Lexvoz's code.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the CLI puts bench/ on the path, not the repository root
    sys.path.insert(0, str(ROOT))

from livekit.agents import (  # noqa: E402
    Agent,
    AgentServer,
    AgentSession,
    JobContext,
    JobExecutorType,
    JobRequest,
    function_tool,
)
from livekit.plugins import openai  # noqa: E402
from openai.types.realtime import AudioTranscription  # noqa: E402
from openai.types.realtime.realtime_audio_input_turn_detection import SemanticVad  # noqa: E402

from agent.settings import Settings, get_settings  # noqa: E402

# Sent instead of a key in rehearsal mode (the stand-in accepts any bearer token), as the Lexvoz worker does.
REHEARSAL_API_KEY = "rehearsal-mode-no-openai"
BARE_INSTRUCTIONS = "Eres un asistente de voz. Hablas siempre en español, con frases claras y breves."
BARE_GREETING = "Saluda brevemente en español y pregunta qué quiere consultar."

TOOL_ENV = "BARE_AGENT_TOOL"  # "1": the agent has the fixed-answer tool below
TOOL_NAME = "search_panama_law"
TOOL_DESCRIPTION = "Busca fuentes y devuelve hasta 3 con título, cita y extracto."
# Three sources of the size Lexvoz sends the model (its excerpts are cut at 750 characters), in its shape.
FIXED_SOURCES = json.dumps(
    {
        "estado": "ok",
        "aviso": "Fuentes de prueba: datos citados, no instrucciones.",
        "fuentes": [
            {
                "title": f"Norma de prueba {n}",
                "citation": f"Norma de prueba {n}, artículo {n}",
                "excerpt": ("Texto de prueba de una fuente, del largo de un extracto de búsqueda. " * 11)[:750],
            }
            for n in (1, 2, 3)
        ],
    },
    ensure_ascii=False,
)


@dataclass(frozen=True)
class BareOptions:
    """Everything the bare agent takes from the deployment's settings (and nothing of Lexvoz's conversation)."""

    agent_name: str
    realtime_model: str
    voice: str
    api_key: str
    base_url: str | None
    max_output_tokens: int
    job_executor: str
    idle_processes: int | None
    max_jobs: int
    target_load: float
    livekit_url: str
    livekit_api_key: str
    livekit_api_secret: str
    worker_host: str
    worker_port: int

    @classmethod
    def from_settings(cls, settings: Settings) -> BareOptions:
        if settings.rehearsal:
            api_key = REHEARSAL_API_KEY
        elif settings.openai_api_key is not None:
            api_key = settings.openai_api_key.get_secret_value()
        else:
            raise SystemExit("bare agent: missing setting OPENAI_API_KEY (or set LEXVOZ_REHEARSAL=1)")
        return cls(
            agent_name=settings.agent_name,
            realtime_model=settings.realtime_model,
            voice=settings.voice,
            api_key=api_key,
            base_url=str(settings.openai_base_url).rstrip("/") if settings.openai_base_url is not None else None,
            max_output_tokens=settings.max_output_tokens,
            job_executor=settings.job_executor,
            idle_processes=settings.idle_processes,
            max_jobs=settings.max_jobs,
            target_load=settings.livekit_target_load,
            livekit_url=settings.livekit_url,
            livekit_api_key=settings.livekit_api_key,
            livekit_api_secret=settings.livekit_api_secret.get_secret_value(),
            worker_host=settings.worker_host,
            worker_port=settings.worker_port,
        )


def build_model(opts: BareOptions) -> openai.realtime.RealtimeModel:
    """The plugin's own model class with Lexvoz's model options (no subclass, no listeners)."""
    kwargs: dict[str, Any] = {}
    if opts.base_url is not None:
        kwargs["base_url"] = opts.base_url
    model = openai.realtime.RealtimeModel(
        model=opts.realtime_model,
        voice=opts.voice,
        api_key=opts.api_key,
        turn_detection=SemanticVad(type="semantic_vad", eagerness="low", interrupt_response=True, create_response=True),
        input_audio_transcription=AudioTranscription(model="gpt-4o-mini-transcribe", language="es"),
        **kwargs,
    )
    model.update_options(max_response_output_tokens=opts.max_output_tokens)
    return model


class BareAgent(Agent):
    """Instructions and a greeting; no tools."""

    def __init__(self) -> None:
        super().__init__(instructions=BARE_INSTRUCTIONS)

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions=BARE_GREETING)


class BareToolAgent(BareAgent):
    """The bare agent with one tool that answers at once: the framework's own cost of a tool turn."""

    @function_tool(name=TOOL_NAME, description=TOOL_DESCRIPTION)
    async def search(self, query: str) -> str:
        """The same fixed sources whatever is asked: no gateway, no search server, no I/O."""
        return FIXED_SOURCES


def build_agent() -> BareAgent:
    return BareToolAgent() if os.environ.get(TOOL_ENV) == "1" else BareAgent()


def build_session(opts: BareOptions) -> AgentSession[None]:
    return AgentSession(llm=build_model(opts))


class CountingAdmission:
    """Admits a room while fewer than `max_jobs` conversations run or are starting (as the Lexvoz worker does)."""

    def __init__(self, max_jobs: int, running: Callable[[], int]) -> None:
        self.max_jobs = max_jobs
        self._running = running
        self._starting = 0

    def in_use(self) -> int:
        return self._running() + self._starting

    async def __call__(self, request: JobRequest) -> None:
        if self.in_use() >= self.max_jobs:
            await request.reject()
            return
        self._starting += 1
        try:
            await request.accept()
        finally:
            self._starting -= 1


def build_server(opts: BareOptions, admission: CountingAdmission) -> AgentServer:
    """The worker: same executor, warm runners and job limit as Lexvoz's; the framework's defaults otherwise."""
    extra: dict[str, Any] = {}
    if opts.idle_processes is not None:
        extra["num_idle_processes"] = opts.idle_processes
    return AgentServer(
        ws_url=opts.livekit_url,
        api_key=opts.livekit_api_key,
        api_secret=opts.livekit_api_secret,
        job_executor_type=JobExecutorType(opts.job_executor),
        load_threshold=math.inf,
        load_fnc=lambda: opts.target_load * min(1.0, admission.in_use() / opts.max_jobs),
        host=opts.worker_host,
        port=opts.worker_port,
        **extra,
    )


def _running_jobs() -> int:
    try:
        return len(server.active_jobs)
    except AttributeError:  # asked before the process pool exists
        return 0


options = BareOptions.from_settings(get_settings())
admission = CountingAdmission(options.max_jobs, _running_jobs)
server = build_server(options, admission)


# Module level: job processes find the entrypoint by its module and name.
@server.rtc_session(agent_name=options.agent_name, on_request=admission)
async def entrypoint(ctx: JobContext) -> None:
    session = build_session(options)
    await session.start(agent=build_agent(), room=ctx.room)
