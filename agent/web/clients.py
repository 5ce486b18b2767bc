"""Who a request comes from, as far as per-client limits go: the key of the bucket it draws from.

Why not simply the socket's peer: behind the reverse proxy the deployment needs, every request comes from
the proxy, so one bucket served every user and the eleventh person in a minute was refused for everyone.
Why not simply X-Forwarded-For: any client can write it, and a service that believed it let one client
spread its requests over invented addresses. So the forwarded headers are read only when the direct TCP
peer is a proxy the operator listed (`LEXVOZ_TRUSTED_PROXIES`), and then from the right: each proxy
appends the address it received the request from, so the right-most address that is not itself a trusted
proxy is the one the outermost proxy saw, which the client cannot choose. Addresses the client wrote are
to its left and are never reached. Anything malformed in that walk stops it at the last address a trusted
proxy vouched for, so a broken header costs its sender a shared bucket, never an arbitrary one.

X-Forwarded-For wins when both headers are present (nginx, Caddy, Traefik and HAProxy write it); Forwarded
(RFC 7239) is read only without it, for a proxy that writes Forwarded alone (such a proxy must drop a
client's X-Forwarded-For, see docs/deploy.md).

IPv6 clients are keyed by their /64: one subscriber usually holds a whole /64 and can use any address in
it, so a per-address key gave them endless buckets. IPv4 clients are keyed by address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Final

from aiohttp import web

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

IPV6_CLIENT_PREFIX: Final = 64
# A chain longer than this many hops is not a real proxy chain; only its right end is looked at.
MAX_HOPS: Final = 16


def socket_peer(request: web.Request) -> str:
    """The direct TCP peer's address, read from the socket ("unknown" when there is none, e.g. a test)."""
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    if isinstance(peer, tuple | list) and peer and isinstance(peer[0], str):
        return peer[0]
    return request.remote or "unknown"


def parse_address(value: str) -> IPAddress | None:
    """An address as proxies write it: bare, quoted, `[v6]`, `[v6]:port` or `v4:port`; None if it is not one."""
    text = value.strip().strip('"').strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]  # IPv4 with a port
    text = text.partition("%")[0]  # an IPv6 zone means nothing beyond the proxy's host
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def client_key(address: IPAddress) -> str:
    """The bucket key: the IPv4 address, or the IPv6 address's /64."""
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, IPV6_CLIENT_PREFIX), strict=False))
    return str(address)


def _trusted(address: IPAddress, proxies: Iterable[IPNetwork]) -> bool:
    return any(address.version == net.version and address in net for net in proxies)


def _forwarded_chain(request: web.Request) -> list[str]:
    """The forwarded addresses, left (client side) to right (nearest proxy), from every header line."""
    xff = request.headers.getall("X-Forwarded-For", [])
    if xff:
        return [item for line in xff for item in line.split(",")]
    try:
        return [str(element.get("for", "")) for element in request.forwarded]
    except (ValueError, UnicodeError):
        return []


def forwarded_client(peer: IPAddress, chain: Sequence[str], proxies: Sequence[IPNetwork]) -> IPAddress:
    """Walk `chain` from the right past trusted proxies; the first other address is the client.

    `peer` is the trusted proxy the request came from. A malformed entry, or a chain of nothing but trusted
    proxies, leaves the last address a trusted proxy vouched for."""
    vouched = peer
    for item in reversed(chain[-MAX_HOPS:]):
        address = parse_address(item)
        if address is None:
            return vouched
        if not _trusted(address, proxies):
            return address
        vouched = address
    return vouched


def client_address(request: web.Request, proxies: Sequence[IPNetwork]) -> str:
    """The client's bucket key: see the module docstring. A peer that is not an IP address keys itself."""
    raw = socket_peer(request)
    peer = parse_address(raw)
    if peer is None:
        return raw
    if proxies and _trusted(peer, proxies):
        return client_key(forwarded_client(peer, _forwarded_chain(request), proxies))
    return client_key(peer)
