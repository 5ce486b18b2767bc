"""One typed settings object for every Lexvoz program.

Read from the environment and from `.env`. A missing or invalid value fails at start with one line
that names the variable, so a misconfigured deployment never half-starts; secrets are `SecretStr`,
which keeps them out of logs and reprs.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import AnyHttpUrl, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from agent.contract import EndpointRefused, check_endpoint_url

logger = logging.getLogger("lexvoz.settings")

DEFAULT_MCP_URL = "http://127.0.0.1:8765/mcp"
# Local development only (livekit-server wants >= 32 characters). They are published in this repository, so
# the settings refuse them as soon as any LiveKit URL in use is not loopback (see `_no_public_dev_secret`).
DEV_API_KEY = "devkey"
DEV_API_SECRET = "lexvoz-local-dev-secret-not-for-production"


def is_loopback_url(url: str) -> bool:
    """True when `url`'s host is localhost or a loopback address: only this machine can reach it."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _origin_of(value: str) -> str:
    """`scheme://host[:port]` exactly as a browser sends it in `Origin`, or ValueError."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"{value.strip()!r} is not an origin like https://lexvoz.example.org")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"{value.strip()!r} is not an origin like https://lexvoz.example.org")
    return f"{parts.scheme}://{parts.netloc.lower()}"


class SettingsError(RuntimeError):
    """A configuration problem, already phrased as the one line to show the operator."""


def _default_max_jobs() -> int:
    """Twice the host's cores: the capacity `bench/load.py` measured (README, Deploy, "Capacity")."""
    return 2 * (os.cpu_count() or 1)


# `VAR=` (an empty value in the environment or in `.env`) means "not set", for every setting: an `export VAR=` left
# in a shell or a Makefile must never turn into a path ".", a port "" that fails to parse, or an empty URL.
_ENV_CONFIG = SettingsConfigDict(
    env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False, env_ignore_empty=True
)


class Settings(BaseSettings):
    model_config = _ENV_CONFIG

    # LiveKit
    livekit_url: str = Field(default="ws://127.0.0.1:7880", alias="LIVEKIT_URL")
    livekit_api_key: str = Field(default=DEV_API_KEY, alias="LIVEKIT_API_KEY")
    livekit_api_secret: SecretStr = Field(default=SecretStr(DEV_API_SECRET), alias="LIVEKIT_API_SECRET")
    agent_name: str = Field(default="lexvoz", alias="LEXVOZ_AGENT_NAME", min_length=1, max_length=64)

    # OpenAI Realtime
    openai_api_key: SecretStr | None = Field(default=None, alias="OPENAI_API_KEY")
    openai_base_url: AnyHttpUrl | None = Field(default=None, alias="OPENAI_BASE_URL")
    realtime_model: str = Field(default="gpt-realtime", alias="LEXVOZ_REALTIME_MODEL", min_length=1)
    voice: str = Field(default="marin", alias="LEXVOZ_VOICE", min_length=1)

    # MCP search service
    mcp_url: AnyHttpUrl = Field(default=AnyHttpUrl(DEFAULT_MCP_URL), alias="LEXVOZ_MCP_URL")
    mcp_token: SecretStr | None = Field(default=None, alias="LEXVOZ_MCP_TOKEN")
    mcp_call_timeout_s: float = Field(default=8.0, gt=0, le=120, alias="LEXVOZ_MCP_TIMEOUT_S")
    mcp_connect_timeout_s: float = Field(default=5.0, gt=0, le=60, alias="LEXVOZ_MCP_CONNECT_TIMEOUT_S")
    mcp_retry_delay_s: float = Field(default=0.1, ge=0, le=10, alias="LEXVOZ_MCP_RETRY_DELAY_S")
    breaker_failure_threshold: int = Field(default=3, ge=1, le=100, alias="LEXVOZ_BREAKER_FAILURES")
    breaker_reset_s: float = Field(default=30.0, gt=0, le=3600, alias="LEXVOZ_BREAKER_RESET_S")
    # Hosts that may be reached over plain http:// besides loopback (comma-separated), e.g. a Compose service.
    mcp_insecure_hosts: Annotated[tuple[str, ...], NoDecode] = Field(default=(), alias="LEXVOZ_MCP_INSECURE_HOSTS")
    mcp_max_reply_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1_048_576, alias="LEXVOZ_MCP_MAX_REPLY_BYTES")
    mcp_mask_queries: bool = Field(default=True, alias="LEXVOZ_MCP_MASK_QUERIES")

    # Conversation bounds
    max_conversation_s: float = Field(default=1800.0, ge=60, le=24 * 3600, alias="LEXVOZ_MAX_CONVERSATION_S")
    max_output_tokens: int = Field(default=600, ge=50, le=4096, alias="LEXVOZ_MAX_OUTPUT_TOKENS")

    # Worker process (the figures behind these defaults: README, Deploy, "Capacity")
    # Conversations one worker runs at once. Unset: twice the host's cores, from `bench/load.py`: a talking
    # conversation costs the worker about a fifth of a core, and livekit-server and the search server often
    # share the host (a 2-core host carried 3 people within the time-to-be-heard goal and saturated at 5).
    max_jobs: int = Field(default_factory=_default_max_jobs, ge=1, le=1000, alias="LEXVOZ_MAX_JOBS")
    # livekit-server's `agents.target_load` (its default 0.7): it offers a room only to a worker whose reported
    # load is below it, so the worker scales its share of job slots to it and reads as full exactly at max_jobs.
    livekit_target_load: float = Field(default=0.7, gt=0.0, le=1.0, alias="LEXVOZ_LIVEKIT_TARGET_LOAD")
    # "process": one process per job (livekit-agents' default); "thread": jobs share the worker's process (one
    # thread and event loop each), far less memory, but a native-library panic in one room's connection ends
    # every conversation of that process (seen under CPU starvation and in the two-node tests), so opt-in only.
    job_executor: Literal["process", "thread"] = Field(default="process", alias="LEXVOZ_JOB_EXECUTOR")
    # Job runners kept warm for the next conversations (unset: livekit-agents' default).
    idle_processes: int | None = Field(default=None, ge=0, le=1000, alias="LEXVOZ_IDLE_PROCESSES")
    # Local Silero VAD in each conversation, besides the Realtime model's own turn detection on the server.
    local_vad: bool = Field(default=False, alias="LEXVOZ_LOCAL_VAD")
    # How the agent's words reach the page: "played" paces them by the audio played (agent/voice/pacing.py),
    # "framework" uses livekit-agents' synchronizer (a spectral analysis of every frame of the agent's audio, a
    # large share of the worker's CPU), "off" sends them as they arrive (ahead of the voice, and whole when cut).
    transcript_pacing: Literal["played", "framework", "off"] = Field(default="played", alias="LEXVOZ_TRANSCRIPT_PACING")
    # Deprecated alias of LEXVOZ_TRANSCRIPT_PACING: false means "off", true the default ("played").
    sync_transcripts: bool | None = Field(default=None, alias="LEXVOZ_SYNC_TRANSCRIPTS")
    worker_host: str = Field(default="127.0.0.1", alias="LEXVOZ_WORKER_HOST")
    worker_port: int = Field(default=8081, ge=0, le=65535, alias="LEXVOZ_WORKER_PORT")

    # Limits
    searches_per_minute: int = Field(default=20, ge=1, le=10_000, alias="LEXVOZ_SEARCHES_PER_MINUTE")
    mcp_connects_per_minute: int = Field(default=10, ge=1, le=10_000, alias="LEXVOZ_MCP_CONNECTS_PER_MINUTE")

    # Observability and audit
    prometheus_port: int | None = Field(default=None, ge=0, le=65535, alias="LEXVOZ_PROMETHEUS_PORT")
    otlp_endpoint: AnyHttpUrl | None = Field(default=None, alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    # The evidence ledger: on unless LEXVOZ_LEDGER=off; a SQLite file (LEXVOZ_LEDGER_PATH, one host) unless
    # LEXVOZ_LEDGER_URL names another store (postgresql://... shared by every worker, or a SQLite path).
    ledger_enabled: bool = Field(default=True, alias="LEXVOZ_LEDGER")
    ledger_path: Path = Field(default=Path("var/ledger.sqlite3"), alias="LEXVOZ_LEDGER_PATH")
    ledger_url: str | None = Field(default=None, alias="LEXVOZ_LEDGER_URL")
    # `python -m agent ledger purge` erases calls older than this many days; unset keeps everything.
    ledger_retention_days: int | None = Field(default=None, ge=1, le=36_500, alias="LEXVOZ_LEDGER_RETENTION_DAYS")
    # PostgreSQL: the role workers and the page service log in as (read and insert only), which `python -m
    # agent ledger migrate`, run with the owner's URL, creates and grants; and its password (URL-safe).
    ledger_app_role: str | None = Field(default=None, alias="LEXVOZ_LEDGER_APP_ROLE")
    ledger_app_password: SecretStr | None = Field(default=None, alias="LEXVOZ_LEDGER_APP_PASSWORD")
    # The HMAC key behind every digest of user text (ledger, logs, traces); created on first run, owner-only.
    digest_key_path: Path | None = Field(default=None, alias="LEXVOZ_DIGEST_KEY_PATH")

    # Token and page service
    web_host: str = Field(default="127.0.0.1", alias="LEXVOZ_WEB_HOST")
    web_port: int = Field(default=8080, ge=0, le=65535, alias="LEXVOZ_WEB_PORT")
    public_livekit_url: str | None = Field(default=None, alias="LEXVOZ_PUBLIC_LIVEKIT_URL")
    token_ttl_s: int = Field(default=600, ge=30, le=900, alias="LEXVOZ_TOKEN_TTL_S")
    token_requests_per_minute: int = Field(default=10, ge=1, le=1000, alias="LEXVOZ_TOKEN_REQUESTS_PER_MINUTE")
    resume_ttl_s: int = Field(default=600, ge=30, le=3600, alias="LEXVOZ_RESUME_TTL_S")
    # A room asks again for an agent (`POST /api/agent`) at most this often while none has joined it.
    agent_retry_s: float = Field(default=5.0, ge=1, le=300, alias="LEXVOZ_AGENT_RETRY_S")
    # Comma-separated origins allowed to call /api/session; unset means "the page's own origin only".
    allowed_origins: str | None = Field(default=None, alias="LEXVOZ_ALLOWED_ORIGINS")
    # Host names this service answers to (the Host header, port aside); anything else is refused, which is what
    # defeats DNS rebinding. Default: this machine's loopback names. Behind a proxy, list the public name.
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        default=("localhost", "127.0.0.1", "::1"), alias="LEXVOZ_ALLOWED_HOSTS"
    )
    # Reverse proxies (addresses or CIDRs) whose X-Forwarded-For/Forwarded is believed; empty: nobody's.
    trusted_proxies: Annotated[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...], NoDecode] = Field(
        default=(), alias="LEXVOZ_TRUSTED_PROXIES"
    )
    # Whole-service caps, whoever asks: live conversations at once, and new agent dispatches per minute.
    max_conversations: int = Field(default=50, ge=1, le=100_000, alias="LEXVOZ_MAX_CONVERSATIONS")
    max_dispatches_per_minute: int = Field(default=60, ge=1, le=100_000, alias="LEXVOZ_MAX_DISPATCHES_PER_MINUTE")
    # Sessions one client may hold that nobody has joined yet (each counts against the cap until its token expires).
    max_pending_sessions_per_client: int = Field(
        default=3, ge=1, le=100_000, alias="LEXVOZ_MAX_PENDING_SESSIONS_PER_CLIENT"
    )
    # Prometheus metrics of the page service (refusals by reason), on their own port; unset: off.
    web_prometheus_port: int | None = Field(default=None, ge=0, le=65535, alias="LEXVOZ_WEB_PROMETHEUS_PORT")
    # Where spent resume tokens are remembered until they expire when the ledger is not PostgreSQL (a local
    # SQLite file, shared by the replicas on this host); default: beside the ledger.
    spent_tokens_path: Path | None = Field(default=None, alias="LEXVOZ_SPENT_TOKENS_PATH")
    web_header_timeout_s: float = Field(default=10.0, gt=0, le=120, alias="LEXVOZ_WEB_HEADER_TIMEOUT_S")
    web_body_timeout_s: float = Field(default=10.0, gt=0, le=120, alias="LEXVOZ_WEB_BODY_TIMEOUT_S")
    rehearsal: bool = Field(default=False, alias="LEXVOZ_REHEARSAL")

    # Files outside the Python package, relative to the working directory (the repository's layout by
    # default; an installed image sets them to wherever it put the files).
    web_dist: Path = Field(default=Path("web/dist"), alias="LEXVOZ_WEB_DIST")
    livekit_config: Path = Field(default=Path("livekit.yaml"), alias="LEXVOZ_LIVEKIT_CONFIG")

    @field_validator(
        "openai_api_key",
        "openai_base_url",
        "mcp_token",
        "prometheus_port",
        "idle_processes",
        "otlp_endpoint",
        "public_livekit_url",
        "digest_key_path",
        "allowed_origins",
        "ledger_url",
        "ledger_retention_days",
        "ledger_app_role",
        "ledger_app_password",
        "spent_tokens_path",
        "web_prometheus_port",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, v: object) -> object:
        """A blank value (`KEY= ` with spaces, or "" passed as an argument) means "not set" as an empty one does."""
        return None if isinstance(v, str) and not v.strip() else v

    @field_validator("max_jobs", mode="before")
    @classmethod
    def _jobs_unset(cls, v: object) -> object:
        return _default_max_jobs() if isinstance(v, str) and not v.strip() else v

    @field_validator("mcp_insecure_hosts", mode="before")
    @classmethod
    def _host_list(cls, v: object) -> object:
        if isinstance(v, str):
            return tuple(h.strip().lower() for h in v.split(",") if h.strip())
        return v

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _allowed_hosts(cls, v: object) -> object:
        if isinstance(v, str):
            hosts = tuple(h.strip().lower().removeprefix("[").removesuffix("]") for h in v.split(",") if h.strip())
            if not hosts:
                raise ValueError("must list at least one host name (e.g. lexvoz.example.org)")
            return hosts
        return v

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxy_networks(cls, v: object) -> object:
        if isinstance(v, str):
            try:
                return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in v.split(",") if item.strip())
            except ValueError as exc:
                raise ValueError(f"must be addresses or CIDRs separated by commas ({exc})") from None
        return v

    @model_validator(mode="after")
    def _pacing_alias(self) -> Self:
        """LEXVOZ_SYNC_TRANSCRIPTS still works (false: "off", true: the default), unless both are set."""
        if self.sync_transcripts is None:
            return self
        if "transcript_pacing" in self.model_fields_set:
            raise SettingsError(
                "LEXVOZ_SYNC_TRANSCRIPTS is deprecated and LEXVOZ_TRANSCRIPT_PACING is set too; keep only "
                "LEXVOZ_TRANSCRIPT_PACING (played, framework or off)"
            )
        logger.warning(
            "LEXVOZ_SYNC_TRANSCRIPTS is deprecated; set LEXVOZ_TRANSCRIPT_PACING=%s instead",
            "played" if self.sync_transcripts else "off",
        )
        self.transcript_pacing = "played" if self.sync_transcripts else "off"
        return self

    @model_validator(mode="after")
    def _mcp_url_policy(self) -> Settings:
        try:
            check_endpoint_url(str(self.mcp_url), self.mcp_insecure_hosts)
        except EndpointRefused as exc:
            raise SettingsError(f"invalid setting LEXVOZ_MCP_URL: {exc}") from None
        return self

    @field_validator("livekit_url", "public_livekit_url")
    @classmethod
    def _ws_scheme(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("ws://", "wss://", "http://", "https://")):
            raise ValueError("must start with ws://, wss://, http:// or https://")
        return v

    @field_validator("ledger_url")
    @classmethod
    def _ledger_store(cls, v: str | None) -> str | None:
        if v is None or "://" not in v:
            return v
        scheme = v.split("://", 1)[0].lower()
        if scheme not in ("postgresql", "postgres", "postgresql+psycopg", "sqlite"):
            raise ValueError("must be a SQLite file path, sqlite:///PATH or postgresql://USER@HOST/DB")
        return v

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, v: str | None) -> str | None:
        if v is None:
            return None
        return ",".join(_origin_of(item) for item in v.split(",") if item.strip()) or None

    @model_validator(mode="after")
    def _no_public_dev_secret(self) -> Self:
        """The development pair is public: refuse it for any LiveKit server other than this machine's."""
        if self.livekit_api_secret.get_secret_value() != DEV_API_SECRET:
            return self
        urls = [self.livekit_url, *([self.public_livekit_url] if self.public_livekit_url else [])]
        if not all(is_loopback_url(url) for url in urls):
            raise ValueError(
                "LIVEKIT_API_KEY/LIVEKIT_API_SECRET are the published development pair, allowed only when "
                "LIVEKIT_URL and LEXVOZ_PUBLIC_LIVEKIT_URL are loopback; set a generated pair "
                "(livekit-server generate-keys)"
            )
        return self

    @property
    def livekit_http_url(self) -> str:
        """The server API's base URL (LiveKit serves its HTTP API on the same address as its WebSocket)."""
        return self.livekit_url.replace("wss://", "https://", 1).replace("ws://", "http://", 1)

    @property
    def allowed_origin_list(self) -> tuple[str, ...]:
        """Origins from LEXVOZ_ALLOWED_ORIGINS, normalized; empty means "same origin as the page"."""
        return tuple(self.allowed_origins.split(",")) if self.allowed_origins else ()

    @property
    def ledger_location(self) -> str | Path:
        """The ledger's store: LEXVOZ_LEDGER_URL when set, else the SQLite file LEXVOZ_LEDGER_PATH."""
        return self.ledger_url or self.ledger_path

    @property
    def spent_tokens_file(self) -> Path:
        """The local store of spent resume tokens: LEXVOZ_SPENT_TOKENS_PATH, or beside the ledger."""
        return self.spent_tokens_path or self.ledger_path.with_name("spent-resume-tokens.sqlite3")

    @property
    def digest_key_file(self) -> Path:
        """Where the digest key lives: LEXVOZ_DIGEST_KEY_PATH, or beside the ledger (same volume, same owner)."""
        return self.digest_key_path or self.ledger_path.with_name("digest.key")

    @property
    def ledger_spool_dir(self) -> Path:
        """Where conversations put their ledger entries for the worker process to write to the store, and where
        they wait while it is unreachable: beside the local ledger file (the same volume and owner), whatever the
        store."""
        return self.ledger_path.with_name("ledger-spool")


class StackSettings(BaseSettings):
    """`python -m agent run`'s defaults (`make run`): where the local stack listens and keeps its files.

    Read like every other setting, so `make run` takes them from the environment or `.env` with an empty value
    meaning "not set"; the command's flags override them. The search server's own variables (PANAMA_LAW_*) name
    the same things here as they do for `python -m panama_law serve`. Ports are fixed (never 0): the stack
    tells each part where the others are before any of them has started.
    """

    model_config = _ENV_CONFIG

    livekit_port: int = Field(default=7880, ge=1, le=65535, alias="LEXVOZ_LIVEKIT_PORT")
    search_port: int = Field(default=8765, ge=1, le=65535, alias="PANAMA_LAW_PORT")
    web_port: int = Field(default=8080, ge=1, le=65535, alias="LEXVOZ_WEB_PORT")
    standin_port: int = Field(default=8790, ge=1, le=65535, alias="LEXVOZ_STANDIN_PORT")
    data_dir: Path = Field(default=Path("data"), alias="PANAMA_LAW_DATA_DIR")
    log_dir: Path = Field(default=Path("var/log"), alias="LEXVOZ_LOG_DIR")
    # A local Constitution JSON to build the index from instead of downloading the pinned one.
    source: Path | None = Field(default=None, alias="PANAMA_LAW_SOURCE")
    norms_dir: Path | None = Field(default=None, alias="PANAMA_LAW_NORMS_DIR")


def load_stack_settings(overrides: dict[str, Any] | None = None) -> StackSettings:
    """The stack's settings (`overrides`, by variable name, win over the environment: the command's flags), or
    SettingsError with one line naming the variable."""
    try:
        return StackSettings(**(overrides or {}))
    except ValidationError as exc:
        raise SettingsError(_first_error_line(exc)) from None


def _first_error_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = err.get("loc")
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if not loc:  # a rule across several variables: the message names them
        return f"invalid settings: {msg}"
    return f"invalid setting {loc[0]}: {msg}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Load once per process; a bad value raises SettingsError with one line naming the variable."""
    try:
        return Settings()
    except SettingsError:
        raise
    except ValidationError as exc:
        raise SettingsError(_first_error_line(exc)) from None
