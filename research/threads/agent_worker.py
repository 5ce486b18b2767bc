"""A bare livekit-agents 1.8.9 worker on the thread executor (or processes), for `worker_repro.py`.

`python -m livekit.agents start research/threads/agent_worker.py` finds `server`. Every job connects to its room
and logs each data packet it receives; a job whose room name contains "block" keeps its loop busy for 20 s right
after its ConnectRequest, so livekit's native library times out on its ReadyForRoomEventRequest (15 s).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time

from livekit import rtc
from livekit.agents import AgentServer, JobContext, JobExecutorType

BLOCK_S = 20.0
logger = logging.getLogger("threads-repro")

server = AgentServer(
    ws_url=os.environ["LIVEKIT_URL"],
    api_key=os.environ["LIVEKIT_API_KEY"],
    api_secret=os.environ["LIVEKIT_API_SECRET"],
    # THREADS_REPRO_EXECUTOR=process runs the same jobs in processes, for comparison
    job_executor_type=JobExecutorType(os.environ.get("THREADS_REPRO_EXECUTOR", "thread")),
    load_threshold=math.inf,
    # report no load: the default (the host's CPU) makes livekit-server offer rooms elsewhere on a busy shared host
    load_fnc=lambda: 0.0,
    num_idle_processes=2,
    host="127.0.0.1",
    port=0,
)


@server.rtc_session(agent_name="threads-repro")
async def entrypoint(ctx: JobContext) -> None:
    name = ctx.job.room.name
    received = 0

    def on_data(_packet: rtc.DataPacket) -> None:
        nonlocal received
        received += 1
        logger.warning("repro: data room=%s n=%d", name, received)

    ctx.room.on("data_received", on_data)
    logger.warning("repro: job started room=%s", name)
    connect = asyncio.create_task(ctx.connect())
    if "block" in name:
        for _ in range(3):
            await asyncio.sleep(0)  # connect's first step sends the ConnectRequest
        time.sleep(BLOCK_S)  # noqa: ASYNC251 - the point: this job's loop cannot answer in time
    try:
        await connect
    except Exception as exc:
        logger.warning("repro: connect failed room=%s error=%s", name, type(exc).__name__)
        raise
    logger.warning("repro: connected room=%s", name)
    ctx.add_shutdown_callback(lambda reason: _log_end(name, reason))


async def _log_end(name: str, reason: str) -> None:
    logger.warning("repro: job ended room=%s reason=%s", name, reason)
