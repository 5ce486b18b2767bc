"""All of the search server's configuration in one typed object, read from PANAMA_LAW_* environment variables.

CLI flags override the environment (the CLI passes them as init arguments); a bad value fails at start with the
variable's name, and the token is a SecretStr so it never appears in logs or reprs.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .corpus import SOURCE_SHA256, SOURCE_URL

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"


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

    @field_validator("token")
    @classmethod
    def _non_blank_token(cls, v: SecretStr | None) -> SecretStr | None:
        """A blank PANAMA_LAW_TOKEN (or --token "") means "no token", not "the empty string is the token"."""
        if v is None or not v.get_secret_value().strip():
            return None
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
        return self.host in ("127.0.0.1", "localhost", "::1")
