"""Who may talk to the MCP endpoint: a request must name an allowed host, then carry the bearer token (if one is set).

Both checks run in front of the session bounds (`panama_law.serve.sessions`), so a request that fails either never
opens a session, and so never makes another client's session close to make room for it.

The Host check is the MCP SDK's own DNS-rebinding protection (`TransportSecuritySettings`), applied here to every
request instead of only inside the SDK's session manager, which sits behind the session bounds. It used to be
switched off whenever the server was bound to a non-loopback address; now it always runs, with the names of
`ServerSettings.allowed_host_names`: a page that rebinds its own domain to this server makes the browser send that
domain as Host, and gets 421.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


def transport_security(hosts: Sequence[str]) -> TransportSecuritySettings:
    """The SDK's settings allowing these host names (any port) as Host, and as http(s) Origin."""
    names = [f"[{h}]" if ":" in h else h for h in hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[pattern for n in names for pattern in (n, f"{n}:*")],
        allowed_origins=[f"{scheme}://{n}{port}" for n in names for scheme in ("http", "https") for port in ("", ":*")],
    )


class HostCheck:
    """Refuse a request whose Host (or Origin) is not allowed, with the SDK's answer (421, or 403 for Origin)."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings) -> None:
        self.app = app
        self._check = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = await self._check.validate_request(Request(scope), is_post=False)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BearerTokenMiddleware:
    """Reject requests without the configured bearer token with HTTP 401, comparing in constant time."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._authorized(scope):
            response = JSONResponse(
                {"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": 'Bearer realm="panama-law"'}
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        header = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
        scheme, _, presented = header.partition(b" ")
        if scheme.lower() != b"bearer":
            presented = b""
        # compare_digest on equal-type bytes: time does not depend on where the first difference is.
        return hmac.compare_digest(presented.strip(), self._expected)
