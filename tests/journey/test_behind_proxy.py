"""An operator's first hour behind the reverse proxy the docs ask for: `deploy/nginx.conf` in front of Lexvoz.

What the operator does (README, docs/deploy.md "Behind a reverse proxy"): start livekit-server and the page
service (`python -m agent web`) with `LEXVOZ_ALLOWED_HOSTS` set to the public name and
`LEXVOZ_TRUSTED_PROXIES` to the proxy's address, and put nginx in front with the shipped file. What must
hold then, for people reaching it through nginx from their own addresses:
1. the page loads, `POST /api/session` gives a token, and that token joins the room through the proxied
   signalling WebSocket;
2. one person spending their token requests is refused (429) while another is still served: before the
   proxy work every user shared the proxy's bucket, so the eleventh person in a minute was refused for all;
3. a client writing its own `X-Forwarded-For` gets no fresh bucket;
4. a name that is not the public one is refused by nginx (its default server closes the connection) and,
   should a request reach the page service directly, by the page service too (421).

The nginx file is the shipped one: the test substitutes its `${...}` placeholders and swaps its "# TLS"
lines for its "# HTTP" lines, as the file's header tells an operator to do for plain HTTP, and nothing else,
so the docs and the test cannot drift. nginx (Debian's `nginx-light`, `make nginx`) runs as the test user
on a free loopback port with its files in a temporary folder, never as the system service. People are told
apart by the loopback address their socket is bound to (127.0.0.2, 127.0.0.3, ...): nginx sees each as a
different client, exactly as it would see people on the internet.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from livekit import rtc

from agent.devstack import livekit_server
from agent.devstack.processes import terminate
from agent.settings import DEV_API_KEY, DEV_API_SECRET
from tests.e2e.conftest import livekit_port, log_tails, require_livekit_server
from tests.ports import free_port

pytestmark = pytest.mark.journey

REPO_ROOT = Path(__file__).resolve().parents[2]
NGINX_CONF = REPO_ROOT / "deploy" / "nginx.conf"
NGINX = Path("/usr/sbin/nginx")  # Debian's nginx-light
PUBLIC_NAME = "lexvoz.example.org"
# The signalling name: the livekit SDK resolves the URL's host itself, so it must be a name loopback has.
LIVEKIT_NAME = "localhost"
TOKENS_PER_MINUTE = 3
START_TIMEOUT_S = 30.0
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=10)


def render_nginx_conf(template: str, values: dict[str, str]) -> str:
    """The shipped file made plain HTTP the way its header says: drop "# TLS" lines, uncomment "# HTTP" ones,
    fill in every `${NAME}` (an unknown placeholder is a KeyError: the file and the test disagree)."""
    lines: list[str] = []
    for line in template.splitlines():
        if line.rstrip().endswith("# TLS"):
            continue
        if line.rstrip().endswith("# HTTP"):
            line = re.sub(r"^(\s*)#\s*", r"\1", line, count=1)
        lines.append(line)
    return re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], "\n".join(lines) + "\n")


def _nginx_main_conf(base: Path, site: Path) -> str:
    """The test's stand-in for /etc/nginx/nginx.conf: everything under `base`, the shipped site included."""
    temp = "\n".join(
        f"    {kind}_temp_path {base / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        "worker_processes 1;\n"
        "events { worker_connections 256; }\n"
        "http {\n"
        f"    access_log {base / 'access.log'};\n"
        f"{temp}\n"
        f"    include {site};\n"
        "}\n"
    )


def _require_nginx() -> None:
    if NGINX.is_file():
        return
    message = "Debian's nginx-light is not installed (`make nginx`, or apt-get install nginx-light)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI must run the proxy journey", pytrace=False)
    pytest.skip(message)


@dataclass(frozen=True)
class Deployment:
    """What the operator has running: livekit-server, the page service and nginx in front of both."""

    proxy_port: int
    web_port: int
    base: Path
    page_dir: Path

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.proxy_port}"

    @property
    def livekit_public_url(self) -> str:
        return f"ws://{LIVEKIT_NAME}:{self.proxy_port}"

    def nginx_logs(self) -> str:
        """Everything nginx wrote: the access logs (the page's, the signalling's) and its error log."""
        paths = [self.base / name for name in ("access.log", "lexvoz-signalling.log", "nginx.log")]
        return "".join(path.read_text(errors="replace") for path in paths if path.exists())

    def upgraded_sockets(self, request: str = r'"GET /rtc') -> list[str]:
        """Log lines of signalling WebSockets nginx passed on to livekit-server (101 Switching Protocols),
        waiting for one: nginx logs a WebSocket when it closes, a moment after the client has let go of it."""
        pattern = re.compile(request)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            lines = [line for line in self.nginx_logs().splitlines() if pattern.search(line) and '" 101 ' in line]
            if lines or time.monotonic() > deadline:
                return lines
            time.sleep(0.1)

    def logs(self) -> str:
        return log_tails(self.base)


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            args, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip


def _wait_for_proxy(port: int, nginx: subprocess.Popen[bytes]) -> None:
    """Return once nginx answers for the public name (any other name gets no answer at all)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if nginx.poll() is not None:
            raise RuntimeError(f"nginx exited with code {nginx.returncode}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/healthz", headers={"Host": PUBLIC_NAME})
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.1)
    raise TimeoutError(f"nginx did not answer on port {port} within {START_TIMEOUT_S:.0f} s")


def _page_dir(base: Path) -> Path:
    """The built page when there is one (`make web`), else a folder with a page of our own."""
    built = REPO_ROOT / "web" / "dist"
    if (built / "index.html").is_file():
        return built
    folder = base / "dist"
    folder.mkdir()
    (folder / "index.html").write_text("<!doctype html><title>Lexvoz</title>\n")
    return folder


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    _require_nginx()
    require_livekit_server()
    base = tmp_path_factory.mktemp("behind-proxy")
    lk_port, web_port, proxy_port = livekit_port(), free_port(), free_port()
    procs: list[tuple[subprocess.Popen[bytes], bool]] = []
    deployed = Deployment(proxy_port=proxy_port, web_port=web_port, base=base, page_dir=_page_dir(base))
    try:
        lk = livekit_server.start(
            api_key=DEV_API_KEY, api_secret=DEV_API_SECRET, port=lk_port, log_path=base / "livekit-server.log"
        )
        procs.append((lk, True))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LEXVOZ_", "LIVEKIT_", "OPENAI_"))}
        env.update(
            {
                # What docs/deploy.md tells the operator to set, with free ports and a temporary folder.
                "LEXVOZ_ALLOWED_HOSTS": PUBLIC_NAME,
                "LEXVOZ_TRUSTED_PROXIES": "127.0.0.1",
                "LEXVOZ_PUBLIC_LIVEKIT_URL": deployed.livekit_public_url,
                "LIVEKIT_URL": f"ws://127.0.0.1:{lk_port}",
                "LIVEKIT_API_KEY": DEV_API_KEY,
                "LIVEKIT_API_SECRET": DEV_API_SECRET,
                "LEXVOZ_WEB_HOST": "127.0.0.1",
                "LEXVOZ_WEB_PORT": str(web_port),
                "LEXVOZ_WEB_DIST": str(deployed.page_dir),
                "LEXVOZ_TOKEN_REQUESTS_PER_MINUTE": str(TOKENS_PER_MINUTE),
                "LEXVOZ_LEDGER_PATH": str(base / "ledger.sqlite3"),
                "LEXVOZ_SPENT_TOKENS_PATH": str(base / "spent-tokens.sqlite3"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        web = _start([sys.executable, "-m", "agent", "web"], env, base / "web.log")
        procs.append((web, False))
        livekit_server.wait_http(f"http://127.0.0.1:{web_port}/healthz", web, timeout=START_TIMEOUT_S, ok_only=True)

        site = base / "lexvoz.conf"
        site.write_text(
            render_nginx_conf(
                NGINX_CONF.read_text(),
                {
                    "LEXVOZ_PUBLIC_NAME": PUBLIC_NAME,
                    "LEXVOZ_LIVEKIT_NAME": LIVEKIT_NAME,
                    "LEXVOZ_WEB_PORT": str(web_port),
                    "LEXVOZ_LIVEKIT_PORT": str(lk_port),
                    "LEXVOZ_HTTP_LISTEN": f"127.0.0.1:{proxy_port}",
                    "NGINX_LOG_DIR": str(base),
                },
            )
        )
        main_conf = base / "nginx.conf"
        main_conf.write_text(_nginx_main_conf(base, site))
        directives = f"daemon off; pid {base / 'nginx.pid'}; error_log {base / 'nginx.log'} info;"
        nginx = _start([str(NGINX), "-p", str(base), "-c", str(main_conf), "-g", directives], env, base / "nginx.log")
        procs.append((nginx, False))
        _wait_for_proxy(proxy_port, nginx)
    except Exception as exc:
        for proc, twice in reversed(procs):
            terminate(proc, term_twice=twice)
        pytest.fail(f"the deployment did not start: {exc}\n{log_tails(base)}", pytrace=False)
    try:
        yield deployed
    finally:
        for proc, twice in reversed(procs):
            terminate(proc, term_twice=twice)


async def _request(
    url: str, *, source: str, method: str = "GET", host: str = PUBLIC_NAME, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    """One request as a person at `source` makes it (their own connection, the public name as Host)."""
    connector = aiohttp.TCPConnector(local_addr=(source, 0), force_close=True)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=REQUEST_TIMEOUT) as client,
        client.request(method, url, headers={"Host": host, **(headers or {})}) as resp,
    ):
        return resp.status, await resp.text()


async def _sessions(deployed: Deployment, source: str, count: int, headers: dict[str, str] | None = None) -> list[int]:
    url = f"{deployed.proxy_url}/api/session"
    return [(await _request(url, source=source, method="POST", headers=headers))[0] for _ in range(count)]


async def test_the_page_loads_and_its_token_joins_the_room_through_the_proxy(deployment: Deployment) -> None:
    status, page = await _request(f"{deployment.proxy_url}/", source="127.0.0.2")
    assert status == 200, f"the page through nginx answered {status}:\n{deployment.logs()}"
    assert page == (deployment.page_dir / "index.html").read_text(), page[:300]

    connector = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0), force_close=True)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=REQUEST_TIMEOUT) as client,
        client.post(f"{deployment.proxy_url}/api/session", headers={"Host": PUBLIC_NAME}) as resp,
    ):
        assert resp.status == 200, f"POST /api/session answered {resp.status}: {await resp.text()}"
        session = await resp.json()
    assert session["url"] == deployment.livekit_public_url, session["url"]

    room = rtc.Room()
    try:
        await asyncio.wait_for(room.connect(session["url"], session["token"]), 30)
        assert room.name == session["room"]
        assert room.local_participant.identity == session["identity"]
    finally:
        await room.disconnect()
    assert deployment.upgraded_sockets(), (
        f"the signalling WebSocket did not go through nginx:\n{deployment.nginx_logs()[-2000:]}"
    )


async def test_the_join_token_in_the_signalling_url_stays_out_of_nginx_logs(deployment: Deployment) -> None:
    """The browser's SDK (livekit-client) opens `/rtc?access_token=<join token>`; nginx must not log the token."""
    status, body = await _request(f"{deployment.proxy_url}/api/session", source="127.0.0.7", method="POST")
    assert status == 200, body
    token = json.loads(body)["token"]
    url = f"{deployment.proxy_url}/rtc?access_token={token}&auto_subscribe=1&sdk=js&protocol=16"
    connector = aiohttp.TCPConnector(local_addr=("127.0.0.7", 0), force_close=True)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=REQUEST_TIMEOUT) as client,
        client.ws_connect(url, headers={"Host": LIVEKIT_NAME}) as socket,
    ):
        joined = await socket.receive(timeout=10)  # livekit-server's join response: the token was accepted
        assert joined.type == aiohttp.WSMsgType.BINARY, joined
    logged = deployment.upgraded_sockets(r'"GET /rtc[ ?]')
    assert logged, f"the browser's request is not in nginx's log:\n{deployment.nginx_logs()[-2000:]}"
    assert token not in deployment.nginx_logs(), "nginx wrote a join token to its log"


async def test_one_client_spending_its_token_requests_leaves_another_served(deployment: Deployment) -> None:
    spent = await _sessions(deployment, "127.0.0.3", TOKENS_PER_MINUTE + 1)
    assert spent == [200] * TOKENS_PER_MINUTE + [429], f"one client's requests through nginx: {spent}"
    other = await _sessions(deployment, "127.0.0.4", 1)
    assert other == [200], f"another client was refused with the first one's bucket: {other}\n{deployment.logs()}"


async def test_a_forged_forwarded_for_gets_no_fresh_bucket(deployment: Deployment) -> None:
    spent = await _sessions(deployment, "127.0.0.5", TOKENS_PER_MINUTE + 1)
    assert spent == [200] * TOKENS_PER_MINUTE + [429], spent
    for forged in ("203.0.113.7", "203.0.113.8, 198.51.100.9", "127.0.0.1"):
        again = await _sessions(deployment, "127.0.0.5", 1, headers={"X-Forwarded-For": forged})
        assert again == [429], f"X-Forwarded-For: {forged} bought a fresh bucket: {again}"


async def test_a_foreign_host_is_refused_by_nginx_and_by_the_page_service(deployment: Deployment) -> None:
    direct = f"http://127.0.0.1:{deployment.web_port}"
    for path, method in (("/", "GET"), ("/api/session", "POST")):
        status, body = await _request(direct + path, source="127.0.0.6", method=method, host="rebound.example.net")
        assert status == 421, f"{method} {path} straight to the page service with a foreign Host"
        assert "LEXVOZ_ALLOWED_HOSTS" in body, body
    status, _ = await _request(f"{direct}/", source="127.0.0.6")
    assert status == 200, "the public name straight to the page service (the proxy's own path) is served"

    # nginx's default server closes the connection with no answer (444) for any name it does not serve.
    for name in ("rebound.example.net", f"127.0.0.1:{deployment.proxy_port}"):
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await _request(f"{deployment.proxy_url}/", source="127.0.0.6", host=name)
