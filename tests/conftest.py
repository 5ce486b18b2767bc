"""Fixtures shared by the whole suite: the fake MCP server, an HTTP session, the Constitution and its index.

Test doubles live in sibling modules (`fakes.py`, `mcp_fixture.py`, `standin_helpers.py`); this file only
wires them as fixtures, gives every test process its own throwaway digest key (never a file in the
checkout), and reports at the end of the run how many tests skipped for want of the Constitution, so a
green run never hides how much it did not test.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from _pytest.terminal import TerminalReporter
from aiohttp.test_utils import TestClient, TestServer

from agent.ops import digest
from agent.settings import Settings
from agent.web.app import create_app
from panama_law.index import disk as index
from panama_law.index.build import import_file
from panama_law.retrieve.search import Searcher
from panama_law.settings import SOURCE_SHA256
from tests import constitution
from tests.mcp_fixture import FakeMcpServer
from tests.postgres_server import PostgresServer, why_unavailable
from tests.search_server import serving
from tests.web_app import ClientFactory, FakeCensus, built_page, make_settings


@pytest.fixture(autouse=True, scope="session")
def _digest_key() -> Iterator[None]:
    digest.configure(secrets.token_bytes(32))
    yield
    digest.configure(None)


@pytest.fixture
async def server() -> AsyncIterator[FakeMcpServer]:
    """A real `mcp` SDK server over loopback HTTP with the default (healthy) behaviour; tests adjust it."""
    srv = FakeMcpServer()
    async with srv.running():
        yield srv


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture(scope="session")
def constitution_path() -> Path:
    """The pinned Constitution JSON (beside the checkout, cached, or downloaded once); skips when unobtainable."""
    return constitution.require()


@pytest.fixture(scope="session")
def constitution_bytes(constitution_path: Path) -> bytes:
    return constitution_path.read_bytes()


@pytest.fixture(scope="session")
def built_dir(tmp_path_factory: pytest.TempPathFactory, constitution_path: Path) -> Path:
    """One real index for the whole session (the build embeds ~700 passages, a few seconds)."""
    data_dir = tmp_path_factory.mktemp("panama_law_index")
    import_file(constitution_path, data_dir, SOURCE_SHA256)
    return data_dir


@pytest.fixture(scope="session")
def searcher(built_dir: Path) -> Searcher:
    return Searcher(index.load(built_dir))


@pytest.fixture(scope="session")
def server_url(searcher: Searcher) -> Iterator[str]:
    """The embedded search server on a free loopback port, with a bearer token set."""
    with serving(searcher) as url:
        yield url


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    """One closing line when tests skipped because the Constitution could not be had, with the reason."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if constitution.SKIP_PREFIX in str(r.longrepr)]
    if skipped:
        reason = constitution.lookup().why_missing
        terminalreporter.write_line(
            f"{len(skipped)} tests skipped: {reason}. Put the file at {constitution.BESIDE_CHECKOUT} "
            f"or set {constitution.ENV_OVERRIDE}.",
            yellow=True,
            bold=True,
        )


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    return built_page(tmp_path)


@pytest.fixture
async def make_client(dist: Path) -> AsyncIterator[ClientFactory]:
    """The page service's aiohttp app on a loopback port, through aiohttp's test client (closed afterwards)."""
    clients: list[TestClient[Any, Any]] = []

    async def factory(
        settings: Settings | None = None, static_dir: Path | None = None, census: FakeCensus | None = None
    ) -> TestClient[Any, Any]:
        # livekit-server's room count comes from a double (no rooms unless the test says so), never a real server.
        app = create_app(
            settings or make_settings(),
            static_dir=static_dir if static_dir is not None else dist,
            census=census or FakeCensus(),
        )
        client: TestClient[Any, Any] = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        clients.append(client)
        return client

    yield factory
    for client in clients:
        await client.close()


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL cluster on a free loopback port for one test module (skipped, with the reason,
    where the server's binaries are missing; `.ci/run` installs them)."""
    reason = why_unavailable()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.cleanup()
