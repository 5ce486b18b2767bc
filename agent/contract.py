"""The `search_panama_law` contract: what a search server must expose and what its answers may hold.

Types first: every rule the gateway enforces lives here as a pydantic model or a pure function, so
the gateway, the `mcp-check` command and the tests all read one definition.
"""

from __future__ import annotations

import ipaddress
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args
from urllib.parse import SplitResult, urlsplit, urlunsplit

import idna
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

TOOL_NAME = "search_panama_law"
MAX_QUERY_CHARS = 2_000
MAX_SOURCES = 3
MAX_TITLE_CHARS = 1_000
MAX_CITATION_CHARS = 1_000
MAX_EXCERPT_CHARS = 750
MAX_URL_CHARS = 2_000
MAX_META_CHARS = 200

FailureReason = Literal[
    "timeout",
    "transport",
    "auth",
    "tool_error",
    "invalid_result",
    "circuit_open",
    "rate_limited",
    "invalid_arguments",
    "contract",
]
"""Why a search produced no evidence: shared by the gateway, the room messages, the metrics, the ledger,
the CLI and the page (`web/src/research.ts`, which a test keeps identical)."""
FAILURE_REASONS: tuple[FailureReason, ...] = get_args(FailureReason)

REQUEST_FAILURE_REASONS: tuple[FailureReason, ...] = tuple(
    r for r in FAILURE_REASONS if r not in ("invalid_arguments", "contract")
)
"""The reasons that are faults of a request to the server (or refusals in front of one: breaker, rate
limit). Argument and contract refusals never reach the server, so they count only as tool-call outcomes."""

Outcome = Literal["completed", "failed", "discarded", "duplicate"]
"""What became of one tool call: evidence shown, a failure said, a stale turn's result dropped, or a repeated
call id answered with the first call's answer. Shared by the research session, spans, metrics and the ledger."""
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_QUERY_CHARS,
            "description": "La pregunta o los términos de búsqueda sobre derecho panameño.",
        }
    },
    "required": ["query"],
    "additionalProperties": False,
}

SOURCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": MAX_TITLE_CHARS},
        "citation": {"type": "string", "maxLength": MAX_CITATION_CHARS},
        "excerpt": {"type": "string", "maxLength": MAX_EXCERPT_CHARS},
        "date": {"type": "string"},
        "gaceta": {"type": "string"},
        "official_source_name": {"type": "string"},
        "official_source_url": {"type": "string", "maxLength": MAX_URL_CHARS},
    },
    "required": ["title", "citation", "excerpt"],
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"results": {"type": "array", "items": SOURCE_SCHEMA}},
    "required": ["results"],
}


class ContractViolation(ValueError):
    """The server's tool does not match the contract; `differences` says how, one item each."""

    def __init__(self, differences: list[str]) -> None:
        super().__init__("; ".join(differences))
        self.differences = differences


class ArgumentError(ValueError):
    """The model produced arguments the contract does not allow; nothing is sent to the server."""


# Bidirectional formatting characters: they can make a citation or a link read differently on screen
# from what it is (the "Trojan Source" trick), so no evidence field may carry them.
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ALLOWED_CONTROLS = frozenset("\n\t")
_TEXT_FIELDS = ("title", "citation", "excerpt", "date", "gaceta", "official_source_name", "official_source_url")
_OPTIONAL_FIELDS = frozenset(("date", "gaceta", "official_source_name", "official_source_url"))


def unsafe_characters(value: str) -> str | None:
    """Name the first control or bidirectional character in `value`, or None when there is none."""
    for ch in value:
        if ch in _BIDI_CONTROLS:
            return f"bidirectional control U+{ord(ch):04X}"
        if unicodedata.category(ch) == "Cc" and ch not in _ALLOWED_CONTROLS:
            return f"control character U+{ord(ch):04X}"
    return None


def normalise_link(value: str) -> str:
    """An http(s) link made safe to show: IDNA-normalised host, no user info, no backslash, a real port.

    Raises ValueError naming the rule. Look-alike Unicode hosts come out as their `xn--` form, so what
    the page shows is what the browser will open.
    """
    if "\\" in value:
        raise ValueError("link contains a backslash")
    if any(ch.isspace() for ch in value):
        raise ValueError("link contains whitespace")
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError("link must be http or https")
    if "@" in parts.netloc:
        raise ValueError("link must not carry user info")
    if not parts.hostname:
        raise ValueError("link has no host")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("link has an invalid port") from None
    if port == 0:
        raise ValueError("link has an invalid port")
    host = _ascii_host(parts.hostname)
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit(SplitResult(parts.scheme.lower(), netloc, parts.path, parts.query, parts.fragment))


def _ascii_host(hostname: str) -> str:
    if hostname.startswith("[") or ":" in hostname:
        try:
            return f"[{ipaddress.IPv6Address(hostname.strip('[]'))}]"
        except ValueError:
            raise ValueError("link has an invalid host") from None
    try:
        return idna.encode(hostname.rstrip("."), uts46=True).decode("ascii")
    except idna.IDNAError:
        raise ValueError("link host is not a valid domain name") from None


class Source(BaseModel):
    """One piece of evidence as it may reach the model and the page; unknown fields are dropped.

    A required field with a control or bidirectional character drops the source; an optional one is
    dropped on its own and the source kept.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, str_strip_whitespace=True)

    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS)
    citation: str = Field(min_length=1, max_length=MAX_CITATION_CHARS)
    excerpt: str = Field(min_length=1, max_length=MAX_EXCERPT_CHARS)
    date: str | None = Field(default=None, max_length=MAX_META_CHARS)
    gaceta: str | None = Field(default=None, max_length=MAX_META_CHARS)
    official_source_name: str | None = Field(default=None, max_length=MAX_TITLE_CHARS)
    official_source_url: str | None = Field(default=None, max_length=MAX_URL_CHARS)

    @model_validator(mode="before")
    @classmethod
    def _no_hidden_characters(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        clean = dict(data)
        for name in _TEXT_FIELDS:
            value = clean.get(name)
            if not isinstance(value, str):
                continue
            problem = unsafe_characters(value)
            if problem is None:
                continue
            if name in _OPTIONAL_FIELDS:
                clean.pop(name)
            else:
                raise ValueError(f"{name} contains a {problem}")
        return clean

    @field_validator("official_source_url")
    @classmethod
    def _safe_url(cls, v: str | None) -> str | None:
        if v is None:
            return None
        link = normalise_link(v)
        if len(link) > MAX_URL_CHARS:
            raise ValueError("link is too long once normalised")
        return link

    def public_dict(self) -> dict[str, str]:
        """The source as sent to the model and the room: only fields that are present."""
        return self.model_dump(exclude_none=True)


@dataclass(frozen=True, slots=True)
class ValidatedResults:
    """What survives validation, with a count of what did not."""

    sources: list[Source]
    dropped: int = 0
    truncated: int = 0
    drop_reasons: list[str] = field(default_factory=list)


class ResultError(ValueError):
    """The server answered, but nothing in the answer may be used as evidence."""

    def __init__(self, code: FailureReason, message: str) -> None:
        super().__init__(message)
        self.code: FailureReason = code


def validate_arguments(arguments: Any) -> str:
    """Return the trimmed query, or raise ArgumentError saying which rule broke."""
    if not isinstance(arguments, dict):
        raise ArgumentError("arguments must be a JSON object")
    keys = set(arguments)
    if keys != {"query"}:
        extra = sorted(keys - {"query"})
        if "query" not in keys:
            raise ArgumentError("missing required argument 'query'")
        raise ArgumentError(f"unexpected arguments: {', '.join(extra)}")
    query = arguments["query"]
    if not isinstance(query, str):
        raise ArgumentError("'query' must be a string")
    query = query.strip()
    if not query:
        raise ArgumentError("'query' is blank")
    if len(query) > MAX_QUERY_CHARS:
        raise ArgumentError(f"'query' is longer than {MAX_QUERY_CHARS} characters")
    return query


def validate_results(structured: Any) -> ValidatedResults:
    """Bound and validate `structuredContent`; raises ResultError when nothing usable is left."""
    if not isinstance(structured, dict):
        raise ResultError("invalid_result", "the tool returned no structured content")
    results = structured.get("results")
    if not isinstance(results, list):
        raise ResultError("invalid_result", "structured content has no 'results' list")
    if not results:
        return ValidatedResults(sources=[])
    valid: list[Source] = []
    reasons: list[str] = []
    examined = 0
    for position, raw in enumerate(results, start=1):
        if len(valid) == MAX_SOURCES:
            break  # validation stops here: nothing past the third valid source can be used
        examined = position
        try:
            if not isinstance(raw, dict):
                raise ValueError("a source must be an object")
            valid.append(Source.model_validate(raw))
        except (ValidationError, ValueError) as exc:
            reasons.append(f"source {position}: {_reason(exc)}")
    if not valid:
        raise ResultError("invalid_result", f"none of the {len(results)} sources is valid: {'; '.join(reasons[:3])}")
    truncated = len(results) - examined
    return ValidatedResults(sources=valid, dropped=len(reasons), truncated=truncated, drop_reasons=reasons)


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        return f"{where}: {message}" if where else message
    return str(exc)


LOOPBACK_NAMES = frozenset(("localhost", "localhost.localdomain", "ip6-localhost"))


class EndpointRefused(ValueError):
    """The MCP endpoint URL breaks the transport policy; the message is the one line for the operator."""


def check_endpoint_url(url: str, insecure_hosts: Iterable[str] = ()) -> str:
    """Return `url` if the gateway may send a token and legal questions to it, else raise EndpointRefused.

    https for every host; plain http only for loopback or for hosts the operator listed (a private
    network such as a Compose service name); never user info, which would replace the bearer header
    with Basic credentials and print the password wherever the URL is shown.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise EndpointRefused("LEXVOZ_MCP_URL must start with https:// (or http:// for loopback or a listed host)")
    if "@" in parts.netloc:
        raise EndpointRefused(
            "LEXVOZ_MCP_URL must not carry user info (user:password@); set the token in LEXVOZ_MCP_TOKEN"
        )
    host = (parts.hostname or "").lower()
    if not host:
        raise EndpointRefused("LEXVOZ_MCP_URL has no host")
    if scheme == "http" and not _is_loopback(host) and host not in {h.strip().lower() for h in insecure_hosts}:
        raise EndpointRefused(
            f"refusing plain http:// to {host!r}: the token and every question would travel in clear; use "
            "https://, or add the host to LEXVOZ_MCP_INSECURE_HOSTS if the network to it is private"
        )
    return url


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_tool(tool_name: str, input_schema: Any, output_schema: Any) -> None:
    """Raise ContractViolation naming every way a listed tool differs from the contract."""
    diffs: list[str] = []
    if tool_name != TOOL_NAME:
        diffs.append(f"tool name is {tool_name!r}, expected {TOOL_NAME!r}")
    if not isinstance(input_schema, dict):
        diffs.append("inputSchema is missing")
    else:
        if input_schema.get("type", "object") != "object":
            diffs.append(f"inputSchema type is {input_schema.get('type')!r}, expected 'object'")
        props = input_schema.get("properties") or {}
        query = props.get("query") if isinstance(props, dict) else None
        if not isinstance(query, dict):
            diffs.append("inputSchema has no 'query' property")
        elif query.get("type") != "string":
            diffs.append(f"inputSchema 'query' type is {query.get('type')!r}, expected 'string'")
        required = input_schema.get("required") or []
        if list(required) != ["query"]:
            diffs.append(f"inputSchema required fields are {sorted(required)!r}, expected ['query'] only")
    if not isinstance(output_schema, dict) or not output_schema:
        diffs.append("outputSchema is missing")
    if diffs:
        raise ContractViolation(diffs)
