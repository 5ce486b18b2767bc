"""The LiveKit worker: `python -m livekit.agents start agent/worker.py [--dev]` finds `server` here.

Settings are read when this module is imported, so a bad deployment fails before it registers with
LiveKit, with one line naming the variable.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from livekit import rtc
from livekit.agents import AgentServer, JobContext, JobExecutorType, JobProcess, JobRequest
from opentelemetry.sdk.trace import TracerProvider

from agent.ops import metrics
from agent.ops.ledger import job_ledger
from agent.ops.redact import RedactingFilter
from agent.ops.telemetry import setup_tracing, shutdown_tracing
from agent.settings import Settings, SettingsError, get_settings
from agent.voice.conversation import Conversation, shared_gateway, start_conversation
from agent.voice.model_link import install_framework_noise_filter
from agent.voice.observers import citation_ledger_observer, ledger_observer
from agent.voice.page_hello import PageHello
from agent.waiting_rooms import Offered, WaitingRooms

if TYPE_CHECKING:  # imported at run time by the worker process only (SQLAlchemy)
    from agent.ops.ledger.shipper import SpoolShipper

logger = logging.getLogger("lexvoz.worker")


def _load_settings() -> Settings:
    try:
        settings = get_settings()
    except SettingsError as exc:
        print(f"lexvoz: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if not settings.rehearsal and settings.openai_api_key is None:
        print(
            "lexvoz: missing setting OPENAI_API_KEY (or set LEXVOZ_REHEARSAL=1 for the local stand-in)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return settings


settings = _load_settings()

# Silero only when local VAD is on. Imported here, at module load, because livekit-agents registers a plugin on the
# main thread only; imported always, it brought onnxruntime into the worker, its forkserver and every job process
# (~19 MB of RSS each) for a VAD that is off by default, and livekit-agents preloads every registered plugin.
silero: Any = importlib.import_module("livekit.plugins.silero") if settings.local_vad else None


def _multiproc_dir() -> str | None:
    """Job processes write their metrics here; the worker's /metrics endpoint sums them.

    A private directory (see `metrics.private_multiprocess_dir`), never a fixed shared path: a refused
    PROMETHEUS_MULTIPROC_DIR stops the worker at start with one line. Checked even with metrics off, since
    livekit-agents then still takes the variable's folder and clears it.
    """
    if settings.prometheus_port is None and not metrics.env_dir():
        return None
    try:
        return str(metrics.private_multiprocess_dir())
    except metrics.MultiprocessDirError as exc:
        print(f"lexvoz: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


class ShutdownNoiseFilter(logging.Filter):
    """A normal stop must not log errors.

    Once the worker is shutting down, livekit-agents kills any idle job process that has not finished
    its warm-up (Silero, imports: over 10 s on a busy small host) with SIGUSR1 and reports the exit
    code -10 at ERROR. That is its own planned kill, not a fault: after "shutting down worker" the record
    is kept as a warning.
    """

    def __init__(self) -> None:
        super().__init__()
        self.shutting_down = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in ("draining worker", "shutting down worker"):
            self.shutting_down = True
        elif self.shutting_down and record.levelno >= logging.ERROR and message == PLANNED_KILL_MESSAGE:
            record.msg = f"{message} (an idle process stopped during shutdown)"
            record.args = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


PLANNED_KILL_MESSAGE = "process exited with non-zero exit code -10"
if not any(isinstance(f, ShutdownNoiseFilter) for f in logging.getLogger("livekit.agents").filters):
    logging.getLogger("livekit.agents").addFilter(ShutdownNoiseFilter())


def install_log_redaction() -> None:
    """Mask personal data in every record any library logs, whatever handler the CLI installed."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


def prewarm(proc: JobProcess) -> None:
    """Warm a job runner: Silero when local VAD is on (the model ships in the wheel: works offline)."""
    if silero is not None:
        proc.userdata["vad"] = silero.VAD.load()
    install_log_redaction()


def running_jobs(server: AgentServer) -> int:
    """Conversations this worker is running now."""
    try:
        return len(server.active_jobs)
    except AttributeError:  # asked before the process pool exists
        return 0


def job_load(server: AgentServer) -> float:
    """Load as the share of job slots in use, scaled to livekit-server's target load: what it compares when it
    picks a worker for a room.

    The default reports the whole machine's CPU, which on a small host that also runs livekit-server and the
    search server says little about this worker. A realtime conversation costs this process a bounded share
    (the model runs remotely), and the job limit is what admission counts, so load is counted in jobs too.
    livekit-server offers a room only while a worker's load is below its `agents.target_load` (0.7 unless
    configured): reported unscaled, a worker with 4 slots looked full with 3 conversations, and a room that
    arrived then never got an agent. Scaled, it reads as full exactly when admission would refuse.
    """
    return settings.livekit_target_load * min(1.0, admission.in_use_with(running_jobs(server)) / settings.max_jobs)


class JobAdmission:
    """Admits a room's job while fewer than `max_jobs` conversations run or are starting.

    livekit-agents' own gate, given a finite load threshold, counts a job it has accepted but not yet
    started as `threshold / num_idle_processes` while no job runs: with one or two warm runners a fresh
    worker takes one or two rooms of a burst and answers "unavailable" for the others, and livekit-server
    then gives up on those rooms, which never get an agent. So the framework's threshold stays unlimited
    and this gate counts exactly: conversations running plus those accepted and still starting. A refused
    job goes back to livekit-server, which offers it to another worker.
    """

    def __init__(self, max_jobs: int, running: Callable[[], int]) -> None:
        self._max_jobs = max_jobs
        self._running = running
        self._starting = 0

    @property
    def in_use(self) -> int:
        return self.in_use_with(self._running())

    def in_use_with(self, running: int) -> int:
        """Slots taken when `running` jobs run: those plus the jobs accepted and still starting."""
        return running + self._starting

    async def __call__(self, request: JobRequest) -> None:
        if self.in_use >= self._max_jobs:
            logger.info("job refused: the worker is at its job limit", extra={"max_jobs": self._max_jobs})
            await request.reject()
            return
        self._starting += 1
        try:
            await request.accept()  # returns once the job is assigned and handed to a runner
        finally:
            self._starting -= 1


# What a job imports beyond the framework's plugins, imported once in livekit-agents' forkserver so that
# every job process inherits it copy-on-write instead of importing it again while its room waits.
PRELOAD_MODULES = [
    "agent.voice.prebuilt",
    "agent.voice.conversation",
    "agent.voice.observers",
    "agent.voice.model_link",
    "agent.ops.ledger",  # what a job needs of it: the writer and the spool, without the store's SQLAlchemy
    "agent.ops.telemetry",
    "agent.ops.metrics",
    "agent.waiting_rooms",  # used by the worker process only, but a job imports this module, which imports it
]


def executor_options(job_settings: Settings) -> dict[str, Any]:
    """How jobs run: executor and warm runners; the job limit is `JobAdmission`'s, not a load threshold."""
    options: dict[str, Any] = {
        "job_executor_type": JobExecutorType(job_settings.job_executor),
        "load_threshold": math.inf,
        "preload_modules": PRELOAD_MODULES,
    }
    if job_settings.idle_processes is not None:
        options["num_idle_processes"] = job_settings.idle_processes
    return options


server = AgentServer(
    ws_url=settings.livekit_url,
    api_key=settings.livekit_api_key,
    api_secret=settings.livekit_api_secret.get_secret_value(),
    prometheus_port=settings.prometheus_port,
    prometheus_multiproc_dir=_multiproc_dir(),
    setup_fnc=prewarm,
    load_fnc=job_load,
    host=settings.worker_host,
    port=settings.worker_port,
    **executor_options(settings),
)

waiting_rooms = WaitingRooms(settings)
_passes: set[asyncio.Task[Offered]] = set()  # referenced until done, so none is collected mid-pass


@server.on("worker_registered")
def offer_waiting_rooms(_worker_id: str, _server_info: object) -> None:
    """On each registration (the first, and each after livekit-server restarts), rooms that were offered while
    no worker was registered are offered again (`agent/waiting_rooms.py`); livekit-server would not."""
    task = asyncio.get_running_loop().create_task(waiting_rooms.offer_again(time.time()))
    _passes.add(task)
    task.add_done_callback(_pass_done)


def _pass_done(task: asyncio.Task[Offered]) -> None:
    _passes.discard(task)
    if not task.cancelled() and (exc := task.exception()) is not None:  # livekit-server's own errors are handled
        logger.warning("rooms left waiting not checked: %s", type(exc).__name__)


_shippers: list[SpoolShipper] = []


@server.on("worker_started")
def ship_the_ledger() -> None:
    """In the worker process only (job processes never start a server): the one writer of the host's ledger spool
    to the store, for every conversation of this worker (`agent/ops/ledger/shipper.py`). Imported here so that
    SQLAlchemy stays out of the job processes, which import this module too."""
    if not settings.ledger_enabled or _shippers:
        return
    from agent.ops.ledger.shipper import SpoolShipper
    from agent.ops.ledger.spool import LedgerSpool

    shipper = SpoolShipper(settings.ledger_location, LedgerSpool(settings.ledger_spool_dir))
    shipper.start()
    _shippers.append(shipper)


_process_tracing: list[TracerProvider | None] = []
_tracing_lock = threading.Lock()


def job_tracing(job_settings: Settings) -> TracerProvider | None:
    """The tracer provider a job uses.

    A job process owns its provider. Jobs on threads share the worker's process, and the provider is
    process-wide (livekit-agents keeps one), so they share one, set up by the first job and kept.
    """
    if job_settings.job_executor == "process":
        return setup_tracing(job_settings)
    with _tracing_lock:
        if not _process_tracing:
            _process_tracing.append(setup_tracing(job_settings))
        return _process_tracing[0]


def end_job_observability(provider: TracerProvider | None, job_settings: Settings) -> None:
    """At a job's end: a job process stops its provider and drops its live gauges; a job thread only
    flushes its spans, since other conversations in the process still use both."""
    if job_settings.job_executor == "process":
        shutdown_tracing(provider)
        metrics.release_process_gauges()
    elif provider is not None:
        provider.force_flush(5000)


def agent_already_in(room: rtc.Room) -> str | None:
    """The identity of another agent already in the room, if any.

    A room asks for an agent again while none has joined it (the page service's `POST /api/agent`); if an
    earlier offer was accepted late, two jobs can reach one room. The later one leaves: two agents would
    talk over each other, and the person is already served."""
    for participant in room.remote_participants.values():
        if participant.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT:
            return participant.identity
    return None


async def run_job(
    ctx: JobContext, job_settings: Settings, *, http_session: aiohttp.ClientSession | None = None
) -> Conversation | None:
    """The whole body of a job: tracing, the ledger, the conversation and how the job ends.

    The entrypoint calls this and nothing else, so a test that runs it with a fake job context and a
    mocked room runs exactly the wiring production runs. `http_session` only outside a real job. None
    when another agent already serves the room and this job ends at once.
    """
    install_log_redaction()
    install_framework_noise_filter()
    provider = job_tracing(job_settings)
    ledger = job_ledger(job_settings)  # into the host's spool; the worker process writes it to the store
    await ledger.start()
    gateway = shared_gateway(job_settings)  # the process's one MCP session; the ledger records its server
    gateway.acquire()

    async def _shutdown(*_: object) -> None:
        await gateway.release("job shutdown")  # the last conversation out closes the MCP session
        await ledger.close()
        end_job_observability(provider, job_settings)

    ctx.add_shutdown_callback(_shutdown)
    page = PageHello(ctx.room)  # before joining: the page greets a new agent as soon as it sees it
    await ctx.connect()
    if agent_already_in(ctx.room) is not None:
        logger.warning("room %s already has an agent: this job ends", ctx.room.name)
        ctx.shutdown(reason="another agent already serves the room")
        page.close()
        return None
    # When the session closes (the user left, or the voice model failed and the room was told), end the
    # job too instead of idling in the room until livekit-server times the agent out.
    return await start_conversation(
        ctx.room,
        job_settings,
        gateway=gateway,
        vad=ctx.proc.userdata.get("vad"),
        observers=[
            ledger_observer(ledger, room=ctx.room.name, session_id=ctx.job.id, server=lambda: gateway.server_info)
        ],
        citation_observers=[citation_ledger_observer(ledger, room=ctx.room.name, session_id=ctx.job.id)],
        page=page,
        http_session=http_session,
        on_end=lambda reason: ctx.shutdown(reason=reason),
    )


admission = JobAdmission(settings.max_jobs, lambda: running_jobs(server))


@server.rtc_session(agent_name=settings.agent_name, on_request=admission)
async def entrypoint(ctx: JobContext) -> None:
    await run_job(ctx, settings)
