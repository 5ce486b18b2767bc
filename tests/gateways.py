"""Gateways as the tests open them: short timeouts, a fast retry, always closed."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from agent.mcp.gateway import GatewayOptions, McpGateway


def make_gateway(url: str, **kw: Any) -> McpGateway:
    opts: dict[str, Any] = dict(url=url, call_timeout_s=2.0, connect_timeout_s=2.0, retry_delay_s=0.01)
    opts.update(kw)
    return McpGateway(GatewayOptions(**opts))


@contextlib.asynccontextmanager
async def opened(url: str, **kw: Any) -> AsyncIterator[McpGateway]:
    gw = make_gateway(url, **kw)
    try:
        yield gw
    finally:
        await gw.aclose()
