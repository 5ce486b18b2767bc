"""The stand-in as a subprocess (``python -m realtime_standin``) and its HTTP control API.

This is the form end-to-end tests and rehearsal mode use: the ready line, ``/healthz``, the
``/control/*`` injections, text-free ``/control/events`` and text-free logs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys

import aiohttp

from tests.standin_helpers import REPO_ROOT, RawClient, pcm_silence


async def test_subprocess_cli_and_control_api(http: aiohttp.ClientSession) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "realtime_standin",
        "--port",
        "0",
        "--speed",
        "50",
        "--transcript",
        "texto secreto",
        cwd=REPO_ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode()
        assert line.startswith("realtime-standin ready http://127.0.0.1:"), line
        base = line.split()[-1].removesuffix("/v1")
        async with http.get(base + "/healthz") as resp:
            assert resp.status == 200 and (await resp.json())["connections"] == 0
        async with http.post(base + "/control/user_turn", json={"transcript": "x"}) as resp:
            assert resp.status == 409  # nobody connected

        ws = await http.ws_connect(
            base.replace("http", "ws", 1) + "/v1/realtime?model=gpt-realtime", headers={"Authorization": "Bearer k"}
        )
        client = RawClient(ws)
        await client.next("session.created")
        await client.send(
            {
                "type": "session.update",
                "session": {
                    "type": "realtime",
                    "tools": [{"type": "function", "name": "search_panama_law"}],
                    "audio": {"input": {"transcription": {"model": "gpt-4o-mini-transcribe"}}},
                },
            }
        )
        await client.next("session.updated")
        await client.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm_silence(100)).decode()})
        async with http.post(base + "/control/speech_started") as resp:
            assert resp.status == 200
        started = await client.next("input_audio_buffer.speech_started")
        async with http.post(base + "/control/user_turn", json={"transcript": "¿Qué es el habeas data?"}) as resp:
            assert (await resp.json())["item_id"] == started["item_id"]
        transcript = await client.next("conversation.item.input_audio_transcription.completed")
        assert transcript["transcript"] == "¿Qué es el habeas data?"
        done = await client.next("response.done")
        call_id = done["response"]["output"][0]["call_id"]
        await client.send(
            {
                "type": "conversation.item.create",
                "item": {"type": "function_call_output", "call_id": call_id, "output": "{}"},
            }
        )
        await client.next("conversation.item.added")
        async with http.get(base + "/control/events") as resp:
            events = await resp.json()
        assert [e["type"] for e in events] == [
            "session.update",
            "input_audio_buffer.append",
            "conversation.item.create",
        ]
        assert events[2]["item_type"] == "function_call_output" and events[2]["call_id"] == call_id
        assert "habeas" not in json.dumps(events)  # no conversation text on the control API
        await ws.close()
    finally:
        proc.terminate()
        _, stderr_bytes = await asyncio.wait_for(proc.communicate(), 10)
    stderr = stderr_bytes.decode()
    assert proc.returncode == 0
    assert "client connected" in stderr
    assert "habeas" not in stderr and "secreto" not in stderr  # logs carry event types only
