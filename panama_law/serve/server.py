"""The MCP server: `search_panama_law` over streamable HTTP, plus a health endpoint and optional bearer auth.

Built on the SDK's low-level `Server` so the tool's input and output schemas are exactly the contract's (no
generated schema), with JSON responses: every call is one POST and one JSON body, which keeps a round trip to a
few milliseconds. Sessions are stateful (a cancellation must reach the call it cancels) and bounded per client
and in total, with idle ones expired (`panama_law.serve.sessions`), so no client can fill the table. Requests must name
an allowed Host and carry the token, if one is set (`panama_law.serve.access`). Logs name a query only by a keyed
fingerprint (`panama_law.serve.fingerprint`).

No one query can stall the others: its size once normalised is checked before any search (`check_query_size`), and
searches run in worker threads, at most `search_threads` at once, so the event loop keeps answering everyone else.

Given its data dir, the server follows the index file (`IndexFollower`): `import` and `remove` swap in a new file,
and the server reads the new one whole in a worker thread and only then swaps the searcher it answers from, so a
query is answered wholly from the old index or wholly from the new one, and no restart is needed. It says which
generation it serves on `/healthz` and in its record in the data dir (`served.record_served`), which the CLI reads
to tell whether its change has been taken.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from .. import __version__
from ..contract import INPUT_SCHEMA, OUTPUT_SCHEMA, TOOL_DESCRIPTION, TOOL_NAME
from ..index import disk as index
from ..retrieve.search import Searcher
from ..settings import LOOPBACK_NAMES, MCP_PATH
from . import served
from .access import BearerTokenMiddleware, HostCheck, transport_security
from .fingerprint import Fingerprinter
from .schema import QueryError, check_query_size, text_rendering, to_source, validate_query
from .sessions import SessionBounds

log = logging.getLogger(__name__)

# Test-only: milliseconds every tools/call waits before searching, so end-to-end tests can barge in on a
# search that is still running. Unset (or 0) in any real deployment.
TEST_DELAY_ENV = "PANAMA_LAW_TEST_DELAY_MS"


def _test_delay_s() -> float:
    try:
        return max(0.0, float(os.environ.get(TEST_DELAY_ENV, "0") or 0) / 1000)
    except ValueError:
        return 0.0


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """How many MCP sessions one client and the whole server may hold, and when an idle one is closed."""

    per_client: int = 16
    total: int = 256
    idle_s: float = 300.0


@dataclass(slots=True)
class ServerState:
    """The searcher once the index is loaded; None while loading or if loading failed (health says 503)."""

    searcher: Searcher | None = None
    error: str | None = None
    loaded_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, searcher: Searcher) -> None:
        with self._lock:
            self.searcher, self.error, self.loaded_at = searcher, None, time.time()


class IndexFollower:
    """Keeps a running server on the latest index in its data dir, without a restart.

    Woken by file-system events on the data dir (watchfiles, already installed with livekit-agents; its Rust
    watcher uses inotify and friends) and, as a backstop for file systems whose events do not arrive (some network
    and container mounts), every `recheck_s` seconds; a wake-up costs one stat. When the index file's identity
    differs from the one the served searcher was read from, the new file is read whole in a worker thread, off the
    event loop, and the searcher reference is swapped only then: a query that already holds the old searcher
    finishes on it. A file that fails to load is logged once and the old index stays served, until the file changes
    again. Changes that arrive during a load are seen by the check that follows it, so the last one is served.
    """

    def __init__(
        self,
        state: ServerState,
        data_dir: Path,
        load: Callable[[], Searcher],
        *,
        recheck_s: float = 2.0,
        instance: str | None = None,
    ) -> None:
        self.state = state
        self.data_dir = data_dir
        self.load = load
        self.recheck_s = recheck_s
        self.instance = instance or secrets.token_hex(6)
        self._failed: index.FileIdentity | None = None
        self._record_warned = False

    def failed(self, identity: index.FileIdentity) -> None:
        """This file could not be loaded (the error is logged): leave it until the index changes again."""
        self._failed = identity

    def served_identity(self) -> index.FileIdentity | None:
        searcher = self.state.searcher
        return searcher.index.identity if searcher is not None else None

    async def check(self) -> None:
        """Load the index if the file is not the one served (nor one that already failed); repeat until it is."""
        while True:
            current = index.file_identity(self.data_dir)
            if current is None or current == self.served_identity() or current == self._failed:
                return
            old = self.state.searcher
            started = time.perf_counter()
            try:
                searcher = await anyio.to_thread.run_sync(self.load)
            except Exception as exc:  # any failure to load: the old index stays, one line says why
                self.failed(current)
                held = old.index.generation if old is not None else "none"
                log.error("changed index could not be loaded; still serving generation %s: %s", held, exc)
                return
            self.state.set(searcher)
            log.info(
                "index reloaded: generation %s, %d articles, loaded in %.2f s",
                searcher.index.generation,
                searcher.article_count,
                time.perf_counter() - started,
            )
            await self.record()

    async def record(self) -> None:
        """Write the served generation into this server's record in the data dir (a read-only mount: warn once)."""
        searcher = self.state.searcher
        if searcher is None:
            return
        try:
            await anyio.to_thread.run_sync(
                served.record_served, self.data_dir, self.instance, searcher.index.generation
            )
        except OSError as exc:
            if not self._record_warned:
                self._record_warned = True
                log.warning("cannot record the served index generation in the data dir (%s); import cannot tell", exc)

    def forget(self) -> None:
        with contextlib.suppress(OSError):
            served.forget_served(self.data_dir, self.instance)

    async def follow(self) -> None:
        """Check now, then on every change of the data dir (or every `recheck_s`), until cancelled."""
        await self.record()
        await self.check()
        try:
            import watchfiles
        except ImportError:
            log.warning("watchfiles is not installed; checking the index file every %.1f s", self.recheck_s)
        else:
            try:
                async for _ in watchfiles.awatch(
                    self.data_dir,
                    watch_filter=lambda _change, path: os.path.basename(path) == index.INDEX_FILE,
                    recursive=False,
                    step=20,
                    debounce=500,
                    rust_timeout=max(1, int(self.recheck_s * 1000)),
                    yield_on_timeout=True,
                ):
                    await self.check()
            except (OSError, RuntimeError) as exc:  # no such directory, no inotify watches left, ...
                log.warning("cannot watch the data dir (%s); checking the index file every %.1f s", exc, self.recheck_s)
        while True:
            await anyio.sleep(self.recheck_s)
            await self.check()


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def build_mcp_server(
    state: ServerState, fingerprint: Callable[[str], str] | None = None, *, search_threads: int = 2
) -> Server[Any]:
    """The MCP server; `fingerprint` names a query in the logs (keyed; a per-process key if not given), and at most
    `search_threads` searches run at once."""
    query_fingerprint = fingerprint or Fingerprinter()
    # Searches run in worker threads so the event loop keeps serving other clients while one runs: on the loop, a
    # half-second search (before `check_query_size`) held every other client's call for as long. A thread cannot be
    # interrupted, so a cancelled call waits for its search to end (`abandon_on_cancel` stays False) and gives its
    # token back only then: running searches never outnumber the limiter, however many calls are cancelled. A call
    # still waiting for a token is cancelled at once. The hand-off costs about 0.2 ms of a 7 ms round trip
    # (bench/search.py --against the loop-bound server, one BLAS thread: p50 7.03 against 6.85 ms, p99 11.9 against
    # 11.5); it once measured far worse while BLAS still ran two busy-waiting threads.
    limiter = anyio.CapacityLimiter(search_threads)
    tool = types.Tool(
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        input_schema=INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False, idempotent_hint=True),
    )
    delay_s = _test_delay_s()

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def on_call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != TOOL_NAME:
            return _error(f"unknown tool {params.name!r}; this server offers {TOOL_NAME!r}")
        try:
            query = validate_query(params.arguments)
        except QueryError as exc:
            log.info("rejected call: %s", exc)
            return _error(f"invalid arguments: {exc}")
        # Taken once: the follower may swap in a new index while this call's search runs in its thread, and the
        # search must be answered wholly from the index it started on.
        searcher = state.searcher
        if searcher is None:
            return _error("the index is not loaded yet; try again shortly")
        try:
            check_query_size(query)  # once loaded: counting tokens needs the encoder, which the load warms up
        except QueryError as exc:
            log.info("rejected call: %s", exc)
            return _error(f"invalid arguments: {exc}")
        started = time.perf_counter()
        try:
            if delay_s:
                await anyio.sleep(delay_s)
            hits = await anyio.to_thread.run_sync(searcher.search, query, limiter=limiter)
        except anyio.get_cancelled_exc_class():
            # The client gave up (notifications/cancelled); no query text here, only that it happened.
            log.info("tool call cancelled")
            raise
        except Exception:
            log.exception("search failed for query %s", query_fingerprint(query))
            return _error("internal error while searching")
        sources = [to_source(hit) for hit in hits]
        log.info(
            "query %s: %d results in %.1f ms",
            query_fingerprint(query),
            len(sources),
            (time.perf_counter() - started) * 1000,
        )
        return types.CallToolResult(
            content=[types.TextContent(text=text_rendering(sources))],
            structured_content={"results": sources},
        )

    return Server("panama-law", version=__version__, on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def build_app(
    state: ServerState,
    *,
    token: str | None = None,
    allowed_hosts: Sequence[str] = LOOPBACK_NAMES,
    loader: Callable[[], Searcher] | None = None,
    limits: SessionLimits | None = None,
    fingerprint_key: bytes | None = None,
    data_dir: Path | None = None,
    reloader: Callable[[], Searcher] | None = None,
    recheck_s: float = 2.0,
    search_threads: int = 2,
) -> Starlette:
    """The ASGI app. `loader`, if given, loads the searcher in a worker thread after start-up (health is 503
    until it finishes), so a supervisor sees the process alive while a first-run index build is under way.
    `limits` bounds the MCP sessions; `fingerprint_key` keys the query fingerprints in the logs. With `data_dir`
    (and `reloader`, which reads its index as it is now), the server follows that index once loaded
    (`IndexFollower`) and health names the generation it serves. Requests to the MCP endpoint must name one of
    `allowed_hosts` as Host (any port); `search_threads` searches run at once."""
    limits = limits or SessionLimits()
    follower = (
        IndexFollower(state, data_dir, reloader, recheck_s=recheck_s)
        if data_dir is not None and reloader is not None
        else None
    )
    security = transport_security(allowed_hosts)
    # Stateful sessions: a client's `notifications/cancelled` must reach the session running its call, or a
    # search the user has talked over runs to the end for nothing. (Stateless mode answers the notice in a
    # fresh session that knows nothing of the call.)
    # The manager's own ceilings sit above ours: SessionBounds closes a session before the manager would ever
    # answer 503, and its idle timer matches ours.
    manager = StreamableHTTPSessionManager(
        app=build_mcp_server(state, Fingerprinter(fingerprint_key), search_threads=search_threads),
        json_response=True,
        stateless=False,
        security_settings=security,
        session_idle_timeout=limits.idle_s,
        max_sessions=limits.total + 64,
    )

    mcp_endpoint = StreamableHTTPASGIApp(manager)  # an instance, so Starlette routes raw ASGI to it
    # Host, then authentication, first: a request failing either never gets to open (or close) a session.
    bounded = SessionBounds(mcp_endpoint, per_client=limits.per_client, total=limits.total, idle_s=limits.idle_s)
    endpoint: ASGIApp = HostCheck(BearerTokenMiddleware(bounded, token) if token else bounded, security)

    async def healthz(request: Request) -> Response:
        searcher = state.searcher
        if searcher is None:
            waiting = {"status": "loading" if state.error is None else "error", "index_loaded": False}
            return JSONResponse(waiting, status_code=503)
        body: dict[str, Any] = {"status": "ok", "index_loaded": True, "articles": searcher.article_count}
        if follower is not None:
            body["generation"] = searcher.index.generation
        return JSONResponse(body)

    async def load_in_background() -> None:
        assert loader is not None
        before = index.file_identity(follower.data_dir) if follower is not None else None
        try:
            state.set(await anyio.to_thread.run_sync(loader))
            log.info("index loaded: %d articles", state.searcher.article_count if state.searcher else 0)
        except Exception as exc:
            state.error = str(exc)
            log.error("index could not be loaded: %s", exc)
            if follower is not None and before is not None and index.file_identity(follower.data_dir) == before:
                follower.failed(before)  # the same file, untouched since: said once is enough
        if follower is not None:  # also after a failed load: an index imported later is served without a restart
            await follower.follow()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with manager.run(), anyio.create_task_group() as tg:
                tg.start_soon(bounded.run_expiry)
                if loader is not None and state.searcher is None:
                    tg.start_soon(load_in_background)
                elif follower is not None:
                    tg.start_soon(follower.follow)
                yield
                tg.cancel_scope.cancel()
        finally:
            if follower is not None:
                follower.forget()

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route(MCP_PATH, endpoint, methods=["GET", "POST", "DELETE"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.router.redirect_slashes = False
    return app
