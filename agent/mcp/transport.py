"""The HTTP transport under the MCP SDK: no standalone GET stream, bounded replies, a record of the wire.

Why a custom httpx transport rather than options on the SDK: the SDK opens the standalone GET (SSE)
stream right after `notifications/initialized` and offers no switch. Some hosted servers (LexLatam's
among them) stall every POST once that stream is open, so the gateway never connects. The streamable
HTTP spec lets a server answer that GET with 405, and the SDK then carries on with POSTs alone; this
transport gives that answer itself, so the GET never leaves the worker. The same place caps how many
bytes one reply may carry (counted while reading, so a 100 MB answer costs at most the cap) and
records statuses, faults and the server's own error text for `errors.py`, which the SDK would
otherwise fold into one generic error.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import AsyncIterator

import httpx2

from agent.mcp.errors import current_probe, server_text_of
from agent.ops.redact import redact

MAX_ERROR_BODY_BYTES = 4_096


class ReplyTooLarge(httpx2.StreamError):
    """A reply body went past the byte cap; reading stopped there.

    A StreamError so the SDK resolves the waiting request with an error instead of failing the transport.
    """


class _CappedStream(httpx2.AsyncByteStream):
    """Passes the body through, counting bytes, and stops with ReplyTooLarge past `cap`."""

    def __init__(self, inner: httpx2.AsyncByteStream, cap: int, declared: int | None) -> None:
        self._inner = inner
        self._cap = cap
        self._declared = declared

    def _exceeded(self) -> ReplyTooLarge:
        probe = current_probe()
        if probe is not None:
            probe.too_large = self._cap
        return ReplyTooLarge(f"the reply is larger than {self._cap} bytes")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._declared is not None and self._declared > self._cap:
            raise self._exceeded()
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._cap:
                raise self._exceeded()
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's own default TLS context (its trust store, `SSL_CERT_FILE` / `SSL_CERT_DIR`), built once per process.

    httpx builds one for every transport, even for a plain-http server, and building one parses the whole CA
    bundle: about 30 ms of CPU on an idle 2-core host, which every conversation paid again while its person
    waited for the agent. `agent.voice.prebuilt` builds it in livekit-agents' forkserver, so job processes
    inherit it. An `SSLContext` is safe to share between connections.
    """
    return httpx2.create_ssl_context()


class GatewayTransport(httpx2.AsyncBaseTransport):
    """httpx transport for the gateway's client: 405 for GET, byte cap, and a probe of every request."""

    def __init__(self, *, max_reply_bytes: int, secret: str | None = None) -> None:
        self._inner = httpx2.AsyncHTTPTransport(verify=tls_context())
        self._cap = max_reply_bytes
        self._secret = secret
        self.get_requests_answered = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":
            # The standalone server-to-client stream: answered here, as a server that offers none would.
            self.get_requests_answered += 1
            return httpx2.Response(405, headers={"allow": "POST, DELETE"}, request=request)
        probe = current_probe()
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            if probe is not None:
                probe.transport_error = exc
            raise
        if request.method != "POST":
            return response
        if probe is not None:
            probe.statuses.append(response.status_code)
        if response.status_code >= 400:
            return await self._error_response(request, response)
        if probe is not None:
            probe.replies_started += 1
        length = response.headers.get("content-length")
        declared = int(length) if length and length.isdigit() else None
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._cap, declared),
            request=request,
            extensions=response.extensions,
        )

    async def _error_response(self, request: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
        """Read a small error body so its text can reach the operator; the SDK gets the same bytes."""
        body = b""
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        try:
            async for chunk in response.stream:
                body += chunk
                if len(body) >= MAX_ERROR_BODY_BYTES:
                    body = body[:MAX_ERROR_BODY_BYTES]
                    break
        finally:
            await response.stream.aclose()
        probe = current_probe()
        if probe is not None and probe.server_text is None:
            probe.server_text = self._scrub(server_text_of(body))
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() != "content-length"]
        return httpx2.Response(
            response.status_code, headers=headers, content=body, request=request, extensions=response.extensions
        )

    def _scrub(self, text: str | None) -> str | None:
        """Never echo our own token back, nor personal data the server quoted."""
        if text is None:
            return None
        if self._secret:
            text = text.replace(self._secret, "[token]")
        return redact(text)

    async def aclose(self) -> None:
        await self._inner.aclose()
