"""`python -m agent doctor`: check a deployment before anyone talks to it.

Each check makes the real call the worker will make later (LiveKit's API with the key and secret, an
explicit dispatch of the agent name, one authenticated request to the OpenAI endpoint, the MCP contract
check of `mcp-check`, a write to the ledger, the page build), so a wrong key or a missing build is found
here, by the operator, and not by the first user as a silent page. The table gives a fix for each
failure; the exit code is 0 only when every check passes.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import aiohttp
from livekit import api

from agent.mcp.check import DEFAULT_QUERY, check
from agent.ops.ledger.store import LedgerStore, describe_location, probe_writable
from agent.settings import Settings, SettingsError, get_settings
from agent.web.spent import SpentStoreUnavailable, SpentTokens

Status = Literal["pass", "fail", "skip"]
HTTP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    detail: str
    fix: str = ""


class CheckFailed(Exception):
    """A failed check: `detail` says what was seen, `fix` what to change."""

    def __init__(self, detail: str, fix: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.fix = fix


def _livekit_failure(exc: Exception) -> CheckFailed:
    if isinstance(exc, api.TwirpError) and exc.status in (401, 403):
        return CheckFailed(
            f"LiveKit refused the credentials (HTTP {exc.status})",
            "set LIVEKIT_API_KEY and LIVEKIT_API_SECRET to a key pair the server knows (its LIVEKIT_KEYS)",
        )
    if isinstance(exc, api.TwirpError):
        return CheckFailed(f"LiveKit answered {exc.code} (HTTP {exc.status})", "check LIVEKIT_URL and the server's log")
    return CheckFailed(
        f"LiveKit not reachable ({type(exc).__name__})",
        "start livekit-server (`make run` starts one) or fix LIVEKIT_URL",
    )


async def check_livekit(settings: Settings) -> str:
    try:
        async with api.LiveKitAPI(
            settings.livekit_http_url,
            settings.livekit_api_key,
            settings.livekit_api_secret.get_secret_value(),
            timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S),
        ) as lk:
            rooms = await lk.room.list_rooms(api.ListRoomsRequest())
    except Exception as exc:
        raise _livekit_failure(exc) from None
    return f"{settings.livekit_url} accepted the key {settings.livekit_api_key!r} ({len(rooms.rooms)} rooms open)"


async def check_dispatch(settings: Settings) -> str:
    """An explicit dispatch of the agent name in a throwaway room, then the room is deleted."""
    room = f"lexvoz-doctor-{secrets.token_hex(4)}"
    try:
        async with api.LiveKitAPI(
            settings.livekit_http_url,
            settings.livekit_api_key,
            settings.livekit_api_secret.get_secret_value(),
            timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S),
        ) as lk:
            await lk.room.create_room(api.CreateRoomRequest(name=room, empty_timeout=10))
            try:
                dispatch = await lk.agent_dispatch.create_dispatch(
                    api.CreateAgentDispatchRequest(agent_name=settings.agent_name, room=room)
                )
            finally:
                await lk.room.delete_room(api.DeleteRoomRequest(room=room))
    except Exception as exc:
        failure = _livekit_failure(exc)
        raise CheckFailed(f"could not dispatch {settings.agent_name!r}: {failure.detail}", failure.fix) from None
    if dispatch.agent_name != settings.agent_name:
        raise CheckFailed(
            f"LiveKit dispatched {dispatch.agent_name!r} instead of {settings.agent_name!r}",
            "check LEXVOZ_AGENT_NAME (the worker and the page service must use the same name)",
        )
    return f"LiveKit accepts dispatches of {settings.agent_name!r}"


OPENAI_FIXES: dict[int, tuple[str, str]] = {
    401: ("the key was rejected", "set OPENAI_API_KEY to a valid key"),
    403: ("the key may not use this model or project", "check OPENAI_API_KEY's project and model access"),
    404: ("the model was not found", "check LEXVOZ_REALTIME_MODEL (and OPENAI_BASE_URL)"),
    429: ("quota exhausted or rate limited", "check the billing and limits of OPENAI_API_KEY's account"),
}


async def check_openai(settings: Settings) -> str:
    """GET {base}/models/{model}: proves the key and that the configured model exists, costs nothing."""
    if settings.rehearsal:
        raise _Skip("rehearsal mode: the local stand-in answers instead of OpenAI; no key to check")
    if settings.openai_api_key is None:
        raise CheckFailed("OPENAI_API_KEY is not set", "set OPENAI_API_KEY (or LEXVOZ_REHEARSAL=1 for the stand-in)")
    base = str(settings.openai_base_url or "https://api.openai.com/v1").rstrip("/")
    url = f"{base}/models/{settings.realtime_model}"
    headers = {"Authorization": f"Bearer {settings.openai_api_key.get_secret_value()}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S)) as http,
            http.get(url, headers=headers) as resp,
        ):
            status = resp.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise CheckFailed(
            f"{base} not reachable ({type(exc).__name__})", "check OPENAI_BASE_URL and the network"
        ) from None
    if status == 200:
        return f"{base} accepted the key; model {settings.realtime_model!r} exists"
    fixes = {
        401: ("the key was rejected (HTTP 401)", "set OPENAI_API_KEY to a valid key"),
        403: (
            "the key may not use this model or project (HTTP 403)",
            "check OPENAI_API_KEY's project and model access",
        ),
        404: (
            f"model {settings.realtime_model!r} not found (HTTP 404)",
            "check LEXVOZ_REALTIME_MODEL (and OPENAI_BASE_URL)",
        ),
        429: ("quota exhausted or rate limited (HTTP 429)", "check the billing and limits of OPENAI_API_KEY's account"),
    }
    detail, fix = fixes.get(status, (f"{base} answered HTTP {status}", "check OPENAI_BASE_URL"))
    raise CheckFailed(detail, fix)


MCP_FIXES: dict[str, str] = {
    "auth": "set LEXVOZ_MCP_TOKEN to the token the search server expects",
    "contract": "point LEXVOZ_MCP_URL at a server that exposes search_panama_law as documented",
}
MCP_DEFAULT_FIX = "start the search server or fix LEXVOZ_MCP_URL (`python -m agent mcp-check URL` shows more)"


async def check_mcp(settings: Settings) -> str:
    token = settings.mcp_token.get_secret_value() if settings.mcp_token else None
    code, report = await check(str(settings.mcp_url), token, DEFAULT_QUERY, settings.mcp_call_timeout_s)
    if code == 0:
        return f"{settings.mcp_url} passes the search_panama_law contract ({report['search']['tool_duration_ms']} ms)"
    failed = report["search"] or report["contract"]
    fix = {
        "auth": "set LEXVOZ_MCP_TOKEN to the token the search server expects",
        "contract": "point LEXVOZ_MCP_URL at a server that exposes search_panama_law as documented",
    }.get(
        failed["error"], "start the search server or fix LEXVOZ_MCP_URL (`python -m agent mcp-check URL` for details)"
    )
    raise CheckFailed(f"{failed['error']}: {failed['detail']}", fix)


async def check_ledger(settings: Settings) -> str:
    if not settings.ledger_enabled:
        return "off (LEXVOZ_LEDGER=off): no tool calls are recorded"
    where = describe_location(settings.ledger_location)
    variable = "LEXVOZ_LEDGER_URL" if settings.ledger_url else "LEXVOZ_LEDGER_PATH"
    try:
        await asyncio.to_thread(probe_writable, settings.ledger_location)
    except Exception as exc:
        raise CheckFailed(
            f"{where} is not writable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
            f"set {variable} to a writable SQLite file path or a reachable postgresql:// URL",
        ) from None
    if settings.ledger_url is not None and await asyncio.to_thread(_owns_the_ledger, settings.ledger_url):
        raise CheckFailed(
            f"{where} is writable, but by a role that owns the ledger: it could drop the append-only triggers",
            "run `python -m agent ledger migrate` as the owner and give the workers and the page service"
            " LEXVOZ_LEDGER_APP_ROLE's URL instead (docs/operations.md, ledger roles)",
        )
    return f"{where} is writable"


def _owns_the_ledger(location: str) -> bool:
    """PostgreSQL: the URL's role may change the schema (a superuser, the database's or the tables' owner)."""
    with LedgerStore.open(location, readonly=True) as store:
        return not store.is_sqlite and store.may_migrate()


async def check_resume_store(settings: Settings) -> str:
    """The page service records each spent resume token here; if it cannot, every resume is refused (503)."""
    store = SpentTokens.from_settings(settings)
    where = describe_location(store.location)
    try:
        # An id no token carries, already past its purge time: the same call's purge removes it again.
        await store.spend(f"doctor-{secrets.token_hex(8)}", 0)
    except SpentStoreUnavailable as exc:
        fix = (
            "run `python -m agent ledger migrate` as the owner (it creates the table and grants the app role)"
            if store.shared_database
            else "set LEXVOZ_SPENT_TOKENS_PATH to a writable file in a folder of the service's own"
        )
        raise CheckFailed(f"{where}: spent resume tokens cannot be recorded ({exc})", fix) from None
    finally:
        await store.aclose()
    return f"spent resume tokens are kept in {where}"


async def check_page(settings: Settings) -> str:
    index = settings.web_dist / "index.html"
    if not index.is_file():
        raise CheckFailed(f"no page build at {index}", "run `make web` (or set LEXVOZ_WEB_DIST to the build)")
    return f"{index} exists"


class _Skip(Exception):
    pass


CHECKS: list[tuple[str, Callable[[Settings], Awaitable[str]]]] = [
    ("livekit", check_livekit),
    ("agent dispatch", check_dispatch),
    ("openai", check_openai),
    ("mcp server", check_mcp),
    ("ledger", check_ledger),
    ("resume tokens", check_resume_store),
    ("page build", check_page),
]


async def run_checks(load: Callable[[], Settings] = get_settings) -> list[CheckResult]:
    try:
        settings = load()
    except SettingsError as exc:
        return [CheckResult("settings", "fail", str(exc), "fix that variable in the environment or .env")]
    results = [CheckResult("settings", "pass", "every setting loaded")]
    for name, run in CHECKS:
        try:
            results.append(CheckResult(name, "pass", await run(settings)))
        except _Skip as skip:
            results.append(CheckResult(name, "skip", str(skip)))
        except CheckFailed as exc:
            results.append(CheckResult(name, "fail", exc.detail, exc.fix))
    return results


def render(results: list[CheckResult]) -> str:
    width = max(len(r.name) for r in results)
    lines = [f"{'check':<{width}}  result  detail", f"{'-' * width}  ------  ------"]
    for r in results:
        lines.append(f"{r.name:<{width}}  {r.status.upper():<6}  {r.detail}")
        if r.fix:
            lines.append(f"{'':<{width}}          fix: {r.fix}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m agent doctor", description=(__doc__ or "").splitlines()[0]).parse_args(argv)
    results = asyncio.run(run_checks())
    print(render(results))
    failed = [r.name for r in results if r.status == "fail"]
    print(f"\ndoctor: {'FAILED: ' + ', '.join(failed) if failed else 'all checks passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
