"""All of the search server's configuration in one typed object, read from PANAMA_LAW_* environment variables.

CLI flags override the environment (the CLI passes them as init arguments); a bad value fails at start with the
variable's name, and the token is a SecretStr so it never appears in logs or reprs.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# The Constitution JSON the first run downloads (PANAMA_LAW_SOURCE_URL), at a pinned commit, and the sha256 it must
# have (PANAMA_LAW_SOURCE_SHA256). Defaults of the configuration, so they live with it: the corpus reader takes them
# from here, and the configuration, which every stage reads, depends on no stage.
SOURCE_URL = (
    "https://raw.githubusercontent.com/Jakisundays/act-panama-api/"
    "0f229b2fb3b39158d1c2ed8df0cdd8bd62e419e2/constitucion_panama.json"
)
SOURCE_SHA256 = "d9c1aeb48449c9c170d6309529430c3c77fdd34ac71114b3f784c33f78e0ac3b"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_ANY_ADDRESS = ("0.0.0.0", "::", "")


class ServerSettings(BaseSettings):
    # `PANAMA_LAW_SOURCE=` (an empty value) means "not set" for every variable: read as given, it was the path "."
    # and the first-run build failed with "unsupported file type"; an empty port failed to parse.
    model_config = SettingsConfigDict(
        env_prefix="PANAMA_LAW_", extra="ignore", case_sensitive=False, env_ignore_empty=True
    )

    host: str = Field(default=DEFAULT_HOST, min_length=1)
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    token: SecretStr | None = None
    data_dir: Path = Path("data")
    source: Path | None = None
    # A folder of norm files (.txt, .pdf, .jsonl, optional NAME.meta.json sidecars) imported at every start.
    norms_dir: Path | None = None
    source_url: str = SOURCE_URL
    source_sha256: str = Field(default=SOURCE_SHA256, pattern=r"^[0-9a-fA-F]{64}$")
    log_level: str = "info"
    # MCP session bounds: per client address, in total, and how long an idle session lives.
    max_sessions_per_client: int = Field(default=16, ge=1, le=10_000)
    max_sessions: int = Field(default=256, ge=1, le=100_000)
    session_idle_timeout_s: float = Field(default=300.0, gt=0, le=86_400)
    # The key behind the query fingerprints in the logs; created on first run (default: in data_dir).
    digest_key_path: Path | None = None
    # How many searches run at once, each in a worker thread off the event loop; more wait their turn. A search
    # holds the GIL for much of its few milliseconds and BLAS runs one thread, so more threads than cores only
    # add contention; two let one long search run beside a short one instead of ahead of it.
    search_threads: int = Field(default=2, ge=1, le=64)
    # Further Host header names the MCP endpoint answers (DNS-rebinding protection), on any port, beside the loopback
    # names and a specific bind address (`allowed_host_names`); a request naming any other host gets 421. Compose
    # sets `search`, the name the worker connects to.
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    # `import --write-glosses`: the OpenAI text model that writes callers' glosses (OPENAI_API_KEY and
    # OPENAI_BASE_URL are the SDK's own variables), its price per million tokens in and out for the estimate shown
    # before a run (gpt-4o-mini's list price when this was written; set your model's), and a request's timeout.
    gloss_model: str = Field(default="gpt-4o-mini", min_length=1)
    gloss_price_in: float = Field(default=0.15, ge=0)
    gloss_price_out: float = Field(default=0.60, ge=0)
    gloss_timeout_s: float = Field(default=60.0, gt=0, le=600)
    # Requests to the model in flight at once while glosses are written (each article is one request of a few
    # seconds; OpenAI's rate limits are retried with their Retry-After).
    gloss_concurrency: int = Field(default=4, ge=1, le=32)
    # `serve` with a norms folder: write glosses for its norms that have none of their own, in the background, with
    # no one to confirm the estimate (off unless asked for: it spends the operator's money). A run nobody confirmed
    # (the server, `import --write-glosses --yes`) is refused when its estimate is over `gloss_max_cost` dollars,
    # and stopped before a request that would take what the endpoint counted over it.
    write_glosses: bool = False
    gloss_max_cost: float = Field(default=1.0, ge=0)

    @field_validator("token")
    @classmethod
    def _non_blank_token(cls, v: SecretStr | None) -> SecretStr | None:
        """A blank PANAMA_LAW_TOKEN (or --token "") means "no token", not "the empty string is the token"."""
        if v is None or not v.get_secret_value().strip():
            return None
        return v

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _host_list(cls, v: object) -> object:
        """A comma-separated list (`search,search.internal`); brackets around an IPv6 address are optional."""
        if isinstance(v, str):
            return tuple(h.strip().lower().removeprefix("[").removesuffix("]") for h in v.split(",") if h.strip())
        return v

    @field_validator("max_sessions")
    @classmethod
    def _total_fits_one_client(cls, v: int, info: ValidationInfo) -> int:
        per_client = info.data.get("max_sessions_per_client")
        if isinstance(per_client, int) and v < per_client:
            raise ValueError("must be at least PANAMA_LAW_MAX_SESSIONS_PER_CLIENT")
        return v

    @property
    def digest_key_file(self) -> Path:
        return self.digest_key_path or self.data_dir / "digest.key"

    @property
    def is_loopback(self) -> bool:
        """Bound to a loopback address only (localhost, 127.0.0.0/8, ::1): no other machine can connect."""
        if self.host.lower() == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return False

    @property
    def allowed_host_names(self) -> tuple[str, ...]:
        """The loopback names, a specific bind address, and PANAMA_LAW_ALLOWED_HOSTS. The loopback names are safe to
        keep: a rebinding page makes a browser send its own domain as Host, never `localhost`."""
        bound = self.host.strip("[]").lower()
        names = [*LOOPBACK_NAMES, *([] if bound in _ANY_ADDRESS else [bound]), *self.allowed_hosts]
        return tuple(dict.fromkeys(names))
