"""The page service's limits when it is open to the internet: per client behind a proxy, for the whole service,
by Host, against malformed bodies, and how refusals are logged and counted.

The real aiohttp app runs on loopback; livekit-server's room count comes from a double (`FakeCensus`).
A "trusted proxy" here is the loopback peer of the test client itself, with `X-Forwarded-For` as the
proxy would write it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from agent.web.app import create_app
from agent.web.capacity import CENSUS_TTL_S, Capacity, DispatchBudget, Refusal
from agent.web.clients import forwarded_client, parse_address
from agent.web.dispatch import RoomView
from agent.web.limits import runner_options
from agent.web.tokens import mint_token, new_identity
from tests.ports import free_port
from tests.web_app import ClientFactory, FakeCensus, make_settings

FULL = "unos minutos"  # what the Spanish "service is full" message asks of the person


def xff(value: str) -> dict[str, str]:
    return {"X-Forwarded-For": value}


async def statuses(client: TestClient[Any, Any], n: int, **kwargs: Any) -> list[int]:
    return [(await client.post("/api/session", **kwargs)).status for _ in range(n)]


async def test_clients_behind_a_trusted_proxy_have_their_own_buckets(make_client: ClientFactory) -> None:
    """Behind the proxy every user shared its bucket: the third person in a minute was refused for everyone."""
    client = await make_client(make_settings(LEXVOZ_TRUSTED_PROXIES="127.0.0.1", LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=2))
    assert await statuses(client, 3, headers=xff("203.0.113.1")) == [200, 200, 429]
    assert await statuses(client, 2, headers=xff("203.0.113.2")) == [200, 200]
    # The proxy appends the address it saw; what the client wrote before it cannot buy a new bucket.
    assert await statuses(client, 1, headers=xff("198.51.100.9, 203.0.113.1")) == [429]
    assert await statuses(client, 1, headers={"X-Forwarded-For": "10.9.9.9", "Forwarded": "for=203.0.113.1"}) == [200]


async def test_an_untrusted_peers_forwarded_headers_are_ignored(make_client: ClientFactory) -> None:
    client = await make_client(make_settings(LEXVOZ_TRUSTED_PROXIES="192.0.2.0/24", LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=2))
    assert await statuses(client, 1, headers=xff("203.0.113.1")) == [200]
    assert await statuses(client, 1, headers=xff("203.0.113.2")) == [200]
    assert await statuses(client, 1, headers={"Forwarded": "for=203.0.113.3"}) == [429]


async def test_ipv6_clients_share_a_bucket_per_64(make_client: ClientFactory) -> None:
    """One subscriber holds a whole /64: per-address buckets gave it endless ones."""
    client = await make_client(make_settings(LEXVOZ_TRUSTED_PROXIES="127.0.0.1", LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=2))
    assert await statuses(client, 1, headers=xff("2001:db8:1:2::1")) == [200]
    assert await statuses(client, 1, headers={"Forwarded": 'for="[2001:db8:1:2:ffff::7]:4711"'}) == [200]
    assert await statuses(client, 1, headers=xff("2001:db8:1:2:abcd::9")) == [429]
    assert await statuses(client, 1, headers=xff("2001:db8:1:3::1")) == [200]


@pytest.mark.parametrize(
    ("chain", "expected"),
    [
        (["203.0.113.5"], "203.0.113.5"),
        (["evil", "203.0.113.5"], "203.0.113.5"),  # garbage the client wrote, left of the proxy's entry
        (["203.0.113.5", "10.0.0.2"], "203.0.113.5"),  # a second trusted proxy on the way
        (["203.0.113.5", "not-an-address"], "10.0.0.1"),  # broken right end: the proxy's own bucket
        (["203.0.113.5", "10.0.0.2", "unknown"], "10.0.0.1"),
        (["10.0.0.3", "10.0.0.2"], "10.0.0.3"),  # nothing but proxies: the last one vouched for
        ([], "10.0.0.1"),
        (["\ud800"], "10.0.0.1"),  # a lone surrogate (an undecodable header) is just malformed
        (["::ffff:203.0.113.5"], "203.0.113.5"),
        (["203.0.113.5:8443"], "203.0.113.5"),
        (['"[2001:db8::1]:80"'], "2001:db8::1"),
    ],
)
def test_the_client_is_the_rightmost_untrusted_address(chain: list[str], expected: str) -> None:
    proxies = (ipaddress.ip_network("10.0.0.0/24"),)
    peer = parse_address("10.0.0.1")
    assert peer is not None
    assert str(forwarded_client(peer, chain, proxies)) == expected


async def test_the_service_refuses_new_conversations_when_full(make_client: ClientFactory) -> None:
    """200 POST /api/session from 20 addresses got 200 tokens, each a paid conversation: now a cap holds."""
    census = FakeCensus({"lexvoz-" + "a" * 32, "lexvoz-" + "b" * 32})
    client = await make_client(make_settings(LEXVOZ_MAX_CONVERSATIONS=3), census=census)
    first = await client.post("/api/session")
    assert first.status == 200
    full = await client.post("/api/session")  # two live rooms and one session not joined yet
    assert full.status == 503
    assert int(full.headers["Retry-After"]) >= 60
    assert FULL in (await full.json())["error"]
    assert census.calls == 1  # cached: the second request asked livekit-server nothing


def test_the_conversation_count_is_livekits_plus_sessions_not_yet_joined() -> None:
    now = [0.0]
    capacity = Capacity(make_settings(LEXVOZ_MAX_CONVERSATIONS=4), FakeCensus(), clock=lambda: now[0])
    live = frozenset({"lexvoz-x"})
    capacity.admit(live, "lexvoz-1")
    capacity.admit(live, "lexvoz-2")
    joined = frozenset({"lexvoz-x", "lexvoz-1"})  # lexvoz-1 showed up: counted once, by livekit-server now
    capacity.admit(joined, "lexvoz-3")
    with pytest.raises(Refusal) as refusal:
        capacity.admit(joined, "lexvoz-4")
    assert refusal.value.reason == "full"
    capacity.admit(joined, "lexvoz-1", resumed=True)  # a live room's rejoin is already counted
    now[0] += 601  # the tokens never used have expired (600 s): they cannot join any more
    capacity.admit(joined, "lexvoz-4")


async def test_the_count_fails_closed_when_livekit_does_not_answer(make_client: ClientFactory) -> None:
    census = FakeCensus()
    census.fail = aiohttp.ClientConnectionError("refused")
    client = await make_client(census=census)
    resp = await client.post("/api/session")
    assert resp.status == 503
    assert "Retry-After" in resp.headers
    assert FULL in (await resp.json())["error"]
    await client.post("/api/session")
    assert census.calls == 1  # the failure is cached like an answer: a flood is not a flood of API calls


async def test_new_dispatches_per_minute_are_capped(make_client: ClientFactory) -> None:
    client = await make_client(make_settings(LEXVOZ_MAX_DISPATCHES_PER_MINUTE=2))
    assert await statuses(client, 2) == [200, 200]
    refused = await client.post("/api/session")
    assert refused.status == 503
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert FULL in (await refused.json())["error"]


class WaitingRoom:
    """livekit-server with every room waiting for an agent, its caller in it."""

    def __init__(self) -> None:
        self.dispatched: list[str] = []

    async def view(self, room: str, identity: str, agent_name: str, gone: str | None = None) -> RoomView | None:
        return RoomView(caller_present=True, agent_present=False)

    async def dispatch(self, room: str, agent_name: str, replacing: tuple[str, ...] = ()) -> None:
        self.dispatched.append(room)


async def test_a_redispatch_spends_the_same_dispatch_budget_as_a_session(make_client: ClientFactory) -> None:
    settings = make_settings(LEXVOZ_MAX_DISPATCHES_PER_MINUTE=2)
    rooms = WaitingRoom()
    app = create_app(settings, rooms=rooms, census=FakeCensus())
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        session = await (await client.post("/api/session")).json()
        auth = {"Authorization": f"Bearer {session['token']}"}
        assert (await client.post("/api/agent", headers=auth)).status == 202
        resp = await client.post("/api/agent", headers=auth)
        assert resp.status == 429  # this room's own pace comes first
        # Another room's re-dispatch would be the third dispatch this minute (the session was the first).
        other = mint_token(settings, room="lexvoz-" + "c" * 32, identity=new_identity())
        resp = await client.post("/api/agent", headers={"Authorization": f"Bearer {other}"})
        assert resp.status == 503
        assert FULL in (await resp.json())["error"]
        assert rooms.dispatched == [session["room"]]


def test_the_dispatch_budget_frees_up_after_a_minute() -> None:
    now = [0.0]
    budget = DispatchBudget(1, clock=lambda: now[0])
    budget.take()
    now[0] += 59
    with pytest.raises(Refusal) as refusal:
        budget.take()
    assert refusal.value.retry_after_s == 1
    now[0] += 1
    budget.take()


async def test_agent_requests_have_a_per_client_limit(make_client: ClientFactory) -> None:
    """`POST /api/agent` had no per-client limit: 200 of 200 were processed, two LiveKit calls each."""
    settings = make_settings(LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=1, LEXVOZ_AGENT_RETRY_S=300)
    client = await make_client(settings)
    codes = [(await client.post("/api/agent", headers={"Authorization": "Bearer x"})).status for _ in range(5)]
    assert codes == [401, 401, 401, 401, 429]
    assert (await client.post("/api/session")).status == 200  # its own bucket, not the token requests'


async def test_refused_requests_write_no_access_log_line(caplog: pytest.LogCaptureFixture) -> None:
    """One access-log line per refused request defeated the throttled warning. The server runs with the
    options `main` gives `web.run_app`."""
    settings = make_settings(LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=1)
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    runner = web.AppRunner(create_app(settings, census=FakeCensus()), **runner_options(settings))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            assert (await http.get(f"{url}/healthz")).status == 200
            for _ in range(5):
                await http.post(f"{url}/api/session")  # one 200, then 429s
                await http.post(f"{url}/api/session", headers={"Origin": "https://evil.example"})
                await http.get(f"{url}/", headers={"Host": "evil.example"})
    finally:
        await runner.cleanup()
    lines = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert any('"GET /healthz' in line for line in lines)
    assert len(lines) == 2, lines  # /healthz and the one session


@pytest.mark.parametrize("path", ["/api/session", "/", "/api/config"])
async def test_a_host_that_is_not_ours_is_refused(make_client: ClientFactory, path: str) -> None:
    """DNS rebinding: an Origin equal to a forged Host passed the same-origin check."""
    client = await make_client()
    forged = {"Host": "evil.example:8080", "Origin": "http://evil.example:8080"}
    resp = await (client.post(path, headers=forged) if path == "/api/session" else client.get(path, headers=forged))
    assert resp.status == 421
    body = await resp.text()
    assert "LEXVOZ_ALLOWED_HOSTS" in body and "evil.example" not in body  # says which setting, reflects nothing
    assert (await client.get("/healthz", headers=forged)).status == 200  # local probes, a constant answer
    ok = {"Host": "[::1]:8080", "Origin": "http://[::1]:8080"}
    assert (await client.post("/api/session", headers=ok)).status == 200


async def test_allowed_hosts_are_the_operators(make_client: ClientFactory) -> None:
    client = await make_client(make_settings(LEXVOZ_ALLOWED_HOSTS="lexvoz.example.org"))
    assert (await client.get("/api/config")).status == 421  # loopback is no longer this service's name
    ours = {"Host": "LEXVOZ.example.org", "Origin": "https://lexvoz.example.org"}
    assert (await client.get("/api/config", headers=ours)).status == 200
    for junk in ("lexvoz.example.org:x", "[lexvoz.example.org", "::1", ""):
        assert (await client.get("/api/config", headers={"Host": junk})).status == 421, junk


def _service_errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Errors and tracebacks the page service logged (its own loggers and aiohttp's, which logs a handler's
    unhandled exception). Not the whole process's: an earlier test's leftover task (the MCP server's SSE
    shutdown watcher) can be garbage-collected during this one and make asyncio log "Task was destroyed" at
    ERROR, which says nothing about the request under test."""
    return [
        r
        for r in caplog.records
        if r.name.split(".")[0] in ("lexvoz", "aiohttp") and (r.levelno >= logging.ERROR or r.exc_info)
    ]


BAD_BODIES = [
    b'{"a": ' + b"[" * 1000 + b"]" * 1000 + b"}",  # RecursionError in the parser
    b'{"\\ud800": 1}',  # a lone surrogate echoed in "campos desconocidos"
    b'{"resume": "\\udfff"}',  # a lone surrogate handed to the token check
    b'{"resume": NaN}',
    b'{"left": Infinity}',
    b'{"\xff": 1}',  # not UTF-8
]


@pytest.mark.parametrize(
    "body", BAD_BODIES, ids=["deep", "surrogate-key", "surrogate-resume", "nan", "infinity", "not-utf8"]
)
@pytest.mark.parametrize("path", ["/api/session", "/api/agent"])
async def test_malformed_json_is_a_400_without_a_traceback(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture, path: str, body: bytes
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = make_settings()
    client = await make_client(settings)
    headers = {"Content-Type": "application/json"}
    if path == "/api/agent":
        headers["Authorization"] = "Bearer " + mint_token(settings, room="lexvoz-" + "d" * 32, identity=new_identity())
    resp = await client.post(path, data=body, headers=headers)
    assert resp.status == 400
    assert (await resp.json())["error"] == "JSON no válido"
    assert not _service_errors(caplog)


async def test_a_lone_surrogate_in_a_header_is_no_500(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Header bytes that are not UTF-8 reach the handlers as lone surrogates."""
    caplog.set_level(logging.DEBUG)
    client = await make_client(make_settings(LEXVOZ_TRUSTED_PROXIES="127.0.0.1"))
    port = client.port
    for header in (
        b"Authorization: Bearer \xed\xa0\x80",
        b"X-Forwarded-For: \xed\xa0\x80",
        b"Origin: http://\xed\xa0\x80",
    ):
        for path in (b"/api/session", b"/api/agent"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n" + header + b"\r\n\r\n"
            )
            await writer.drain()
            async with asyncio.timeout(10):
                status_line = await reader.readline()
            writer.close()
            assert status_line.split()[1] in (b"200", b"400", b"401", b"403"), (header, path, status_line)
    assert not _service_errors(caplog)


async def test_refusals_are_counted_by_reason_on_the_metrics_port_only(make_client: ClientFactory) -> None:
    port = free_port()
    client = await make_client(make_settings(LEXVOZ_WEB_PROMETHEUS_PORT=port, LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=1))
    await client.post("/api/session")
    await client.post("/api/session")  # rate
    await client.post("/api/session", headers={"Origin": "https://evil.example"})  # origin
    await client.get("/", headers={"Host": "evil.example"})  # host
    await client.post("/api/agent", data=b"{", headers={"Content-Type": "application/json"})  # token, before the body
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as resp:
        assert resp.status == 200
        text = await resp.text()
    for reason, count in (("rate", 1), ("origin", 1), ("host", 1), ("token", 1), ("full", 0)):
        assert f'lexvoz_web_refusals_total{{reason="{reason}"}} {count}.0' in text, reason
    public = await client.get("/metrics")
    assert "lexvoz_web_refusals" not in await public.text()


async def test_a_client_cannot_hold_the_service_full_with_sessions_it_never_joins(make_client: ClientFactory) -> None:
    """Every session not yet joined counts against LEXVOZ_MAX_CONVERSATIONS for a token's lifetime, so a few
    addresses asking for tokens they never use could hold the whole service full (5 addresses at 10 a minute
    fill the default 50). A client may hold only a few such sessions."""
    settings = make_settings(LEXVOZ_MAX_PENDING_SESSIONS_PER_CLIENT=2, LEXVOZ_MAX_CONVERSATIONS=10)
    client = await make_client(settings)
    assert await statuses(client, 2) == [200, 200]
    hoarding = await client.post("/api/session")
    assert hoarding.status == 429
    assert "Retry-After" in hoarding.headers
    assert "sesiones" in (await hoarding.json())["error"]
    other = await client.post("/api/session", headers={"X-Forwarded-For": "203.0.113.9"})  # not a trusted proxy
    assert other.status == 429  # the same client, whatever it writes


async def test_a_room_once_joined_stops_counting_as_pending_even_if_left_between_counts() -> None:
    """A person who joins and leaves between two counts never shows up as occupied, but the room still exists
    in livekit-server for a while: that is enough to know the token was used."""
    now = [0.0]
    census = FakeCensus()
    settings = make_settings(LEXVOZ_MAX_PENDING_SESSIONS_PER_CLIENT=1, LEXVOZ_MAX_CONVERSATIONS=2)
    capacity = Capacity(settings, census, clock=lambda: now[0])
    capacity.admit(await capacity.live_rooms(), "lexvoz-1", client="198.51.100.7")
    with pytest.raises(Refusal) as refusal:
        capacity.admit(await capacity.live_rooms(), "lexvoz-2", client="198.51.100.7")
    assert refusal.value.reason == "pending" and refusal.value.status == 429
    capacity.admit(await capacity.live_rooms(), "lexvoz-3", client="198.51.100.8")  # another client is served
    census.existing = {"lexvoz-1"}  # joined and left: not occupied, but it exists
    now[0] += CENSUS_TTL_S
    live = await capacity.live_rooms()
    assert live == frozenset()
    capacity.admit(live, "lexvoz-2", client="198.51.100.7")
