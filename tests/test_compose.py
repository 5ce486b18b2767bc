"""The container setup: the compose file is valid Compose, every variable it uses is documented,
and the image runs as a non-root user with no secret baked in.

No Docker engine is needed: these are static checks. The Compose Specification schema comes from
the `check-jsonschema` package, which vendors compose-spec's `compose-spec.json` (Apache-2.0).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agent.settings import DEV_API_SECRET, Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "Dockerfile"

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(?::?[-?+])[^}]*)?\}")
_ENV_LINE_RE = re.compile(r"^#?\s*([A-Z][A-Z0-9_]*)=")
_SECRETISH = re.compile(r"(KEY|SECRET|TOKEN|PASSW(OR)?D|CREDENTIAL|PRIVATE)", re.IGNORECASE)


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def _documented() -> dict[str, int]:
    """Variable name -> line number in .env.example (set or commented out)."""
    out: dict[str, int] = {}
    for n, line in enumerate(ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()):
        m = _ENV_LINE_RE.match(line)
        if m:
            out.setdefault(m.group(1), n)
    return out


def test_compose_matches_the_compose_specification() -> None:
    text = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
    schema = json.loads(text)
    jsonschema.validate(_compose(), schema, cls=jsonschema.validators.validator_for(schema))


def test_compose_services_and_commands() -> None:
    services = _compose()["services"]
    assert set(services) == {"livekit", "search", "ledger-db", "ledger-migrate", "agent", "web"}
    assert services["livekit"]["image"] == "livekit/livekit-server:v1.13.5"
    assert services["livekit"]["command"].startswith("--config /etc/livekit.yaml")
    assert "./livekit.yaml:/etc/livekit.yaml:ro" in services["livekit"]["volumes"]
    assert services["search"]["command"][-4:] == ["panama_law", "serve", "--host", "0.0.0.0"]
    assert "/healthz" in " ".join(services["search"]["healthcheck"]["test"])
    assert services["agent"]["command"][-2:] == ["agent", "start"]
    assert services["web"]["command"][-2:] == ["agent", "web"]
    assert services["agent"]["depends_on"]["search"]["condition"] == "service_healthy"
    agent_env = services["agent"]["environment"]
    assert agent_env["LIVEKIT_URL"] == "ws://livekit:7880"
    assert agent_env["LEXVOZ_MCP_URL"] == "http://search:8765/mcp"
    # the token the agent sends is the token the search server checks
    assert agent_env["LEXVOZ_MCP_TOKEN"] == services["search"]["environment"]["PANAMA_LAW_TOKEN"]
    # the ledger: one PostgreSQL for every worker, healthy before the agent starts, never published
    ledger_db = services["ledger-db"]
    assert ledger_db["image"].startswith("postgres:") and "ports" not in ledger_db
    assert ledger_db["environment"]["POSTGRES_PASSWORD"].startswith("${LEXVOZ_LEDGER_DB_PASSWORD:?")
    assert services["agent"]["depends_on"]["ledger-db"]["condition"] == "service_healthy"
    assert agent_env["LEXVOZ_LEDGER_URL"].startswith("postgresql://lexvoz_app:${LEXVOZ_LEDGER_APP_PASSWORD:?")
    assert agent_env["LEXVOZ_LEDGER_URL"].endswith("@ledger-db:5432/ledger")
    web_env = services["web"]["environment"]
    assert web_env["LEXVOZ_WEB_HOST"] == "0.0.0.0"
    assert "LEXVOZ_PUBLIC_LIVEKIT_URL" in web_env
    # livekit-server's keys follow the same variables as its clients, and Compose requires them
    keys = services["livekit"]["environment"]["LIVEKIT_KEYS"]
    assert keys.startswith("${LIVEKIT_API_KEY:?") and ": ${LIVEKIT_API_SECRET:?" in keys
    for name in ("agent", "web"):
        env = services[name]["environment"]
        assert env["LIVEKIT_API_KEY"].startswith("${LIVEKIT_API_KEY:?")
        assert env["LIVEKIT_API_SECRET"].startswith("${LIVEKIT_API_SECRET:?")


def test_the_ledger_owner_migrates_once_and_the_services_log_in_as_the_app_role() -> None:
    """Only ledger-db and the one-shot ledger-migrate know the owner's password; agent and web use the role that
    may only read and insert, which ledger-migrate creates before either of them starts."""
    services = _compose()["services"]
    owner_password = "${LEXVOZ_LEDGER_DB_PASSWORD:?"
    app_url = "postgresql://lexvoz_app:${LEXVOZ_LEDGER_APP_PASSWORD:?"
    migrate = services["ledger-migrate"]
    assert migrate["command"][-3:] == ["agent", "ledger", "migrate"] and migrate["restart"] == "no"
    assert migrate["depends_on"]["ledger-db"]["condition"] == "service_healthy"
    env = migrate["environment"]
    assert env["LEXVOZ_LEDGER_URL"].startswith("postgresql://lexvoz:" + owner_password)
    assert env["LEXVOZ_LEDGER_APP_ROLE"] == "lexvoz_app"
    assert env["LEXVOZ_LEDGER_APP_PASSWORD"].startswith("${LEXVOZ_LEDGER_APP_PASSWORD:?")
    for name in ("agent", "web"):
        service = services[name]
        assert service["depends_on"]["ledger-migrate"]["condition"] == "service_completed_successfully", name
        url = service["environment"]["LEXVOZ_LEDGER_URL"]
        assert url.startswith(app_url) and url.endswith("@ledger-db:5432/ledger"), name
    holders = {n for n, svc in services.items() if owner_password in json.dumps(svc.get("environment") or {})}
    assert holders == {"ledger-db", "ledger-migrate"}


def test_no_default_livekit_secret_anywhere() -> None:
    """The published development pair appears in no deployment file: Compose requires real values."""
    for path in (COMPOSE, ENV_EXAMPLE):
        text = path.read_text(encoding="utf-8")
        assert DEV_API_SECRET not in text, path.name
        assert "devkey" not in text, path.name
    for match in re.finditer(r"\$\{(LIVEKIT_API_(?:KEY|SECRET))(:?[-?+])?[^}]*\}", COMPOSE.read_text(encoding="utf-8")):
        assert match.group(2) == ":?", f"{match.group(0)} must be required (${{VAR:?message}})"
    env_text = ENV_EXAMPLE.read_text(encoding="utf-8")
    assert "generate-keys" in env_text and "secrets.token_urlsafe" in env_text


def test_published_ports_bind_to_loopback_by_default() -> None:
    """Signalling and the page are published on 127.0.0.1 unless the operator sets LEXVOZ_PUBLISH_ADDRESS."""
    services = _compose()["services"]
    signalling = [p for p in services["livekit"]["ports"] if str(p).endswith(":7880")]
    page = [p for p in services["web"]["ports"] if str(p).endswith(":8080")]
    assert signalling and page
    for port in (*signalling, *page):
        assert str(port).startswith("${LEXVOZ_PUBLISH_ADDRESS:-127.0.0.1}:"), port


def test_every_compose_variable_is_documented() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    referenced = set(_VAR_RE.findall(text))
    # every variable a container receives is documented too, including `NAME:` with no value,
    # which passes NAME through from the environment or .env
    for service in _compose()["services"].values():
        env = service.get("environment") or {}
        assert isinstance(env, dict), "use the mapping form for environment"
        referenced |= set(env)
    assert "OPENAI_API_KEY" in referenced
    missing = sorted(referenced - set(_documented()))
    assert not missing, f"not in .env.example: {missing}"


def test_every_setting_is_documented() -> None:
    aliases = {f.alias for f in Settings.model_fields.values() if f.alias}
    missing = sorted(aliases - set(_documented()))
    assert not missing, f"Settings aliases not in .env.example: {missing}"


def test_every_documented_variable_has_a_comment() -> None:
    lines = ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
    for name, n in _documented().items():
        above = lines[n - 1] if n else ""
        assert above.startswith("#") and not _ENV_LINE_RE.match(above), f"{name} has no comment above it"


def test_env_example_holds_no_real_secret() -> None:
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Z][A-Z0-9_]*)=(.*)$", line)
        if m and _SECRETISH.search(m.group(1)):
            assert m.group(2) == "", f"{m.group(1)} carries a value"


def _stages() -> list[list[str]]:
    """Dockerfile instructions (continuations joined), split per stage."""
    joined: list[str] = []
    buf = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        buf = f"{buf} {line[:-1]}" if line.endswith("\\") else f"{buf} {line}"
        if not line.endswith("\\"):
            joined.append(buf.strip())
            buf = ""
    stages: list[list[str]] = []
    for instr in joined:
        if instr.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(instr)
    return stages


def test_dockerfile_is_multi_stage_with_a_non_root_runtime() -> None:
    stages = _stages()
    assert len(stages) >= 3
    froms = [s[0] for s in stages]
    assert any("node" in f for f in froms)
    web_stage = next(s for s in stages if "node" in s[0])
    assert any("npm ci" in i for i in web_stage) and any("npm run build" in i for i in web_stage)
    runtime = stages[-1]
    users = [i.split(None, 1)[1].strip() for i in runtime if i.upper().startswith("USER ")]
    assert users, "runtime stage has no USER"
    assert users[-1].split(":")[0] not in ("root", "0")
    assert any(i.upper().startswith("COPY --FROM=") and i.rstrip().endswith("web/dist") for i in runtime)


def _assignments(body: str) -> list[tuple[str, str]]:
    """`A=1 B="x y"` or the legacy `A value` form of ENV/ARG, as (name, value) pairs."""
    if "=" in body.split(None, 1)[0]:
        return re.findall(r'([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)', body)
    name, _, value = body.partition(" ")
    return [(name, value.strip())]


@pytest.mark.parametrize("keyword", ["ENV", "ARG"])
def test_dockerfile_bakes_in_no_secret(keyword: str) -> None:
    assert _assignments('A=1 B="x y" C=') == [("A", "1"), ("B", '"x y"'), ("C", "")]
    assert _assignments("TOKEN abc") == [("TOKEN", "abc")]
    for stage in _stages():
        for instr in stage:
            if instr.upper().startswith(keyword + " "):
                for name, value in _assignments(instr.split(None, 1)[1]):
                    if _SECRETISH.search(name):
                        assert value in ("", '""'), f"{keyword} {name} carries a value in the Dockerfile"


def test_dockerignore_keeps_secrets_and_state_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    for entry in (".env", ".git", ".venv", "var/", "web/node_modules"):
        assert entry in ignored


def test_no_secret_has_a_published_default() -> None:
    """A secret is required (`${VAR:?message}`): never `${VAR:-value}`, a value anyone can read in this file."""
    secrets_seen = set()
    for match in re.finditer(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-?+])?[^}]*\}", COMPOSE.read_text(encoding="utf-8")):
        name, operator = match.group(1), match.group(2)
        if _SECRETISH.search(name):
            secrets_seen.add(name)
            assert operator == ":?", f"{match.group(0)} must be required (${{{name}:?message}})"
    assert {"PANAMA_LAW_TOKEN", "LIVEKIT_API_SECRET", "LEXVOZ_LEDGER_DB_PASSWORD", "LEXVOZ_LEDGER_APP_PASSWORD"} <= (
        secrets_seen
    )


def test_search_token_is_required_and_the_example_says_how_to_make_one() -> None:
    services = _compose()["services"]
    token = services["search"]["environment"]["PANAMA_LAW_TOKEN"]
    assert token.startswith("${PANAMA_LAW_TOKEN:?") and services["agent"]["environment"]["LEXVOZ_MCP_TOKEN"] == token
    env_text = ENV_EXAMPLE.read_text(encoding="utf-8")
    assert "lexvoz-local-dev-token" not in env_text + COMPOSE.read_text(encoding="utf-8")
    assert re.search(r"^PANAMA_LAW_TOKEN=$", env_text, re.MULTILINE)
    assert "openssl rand -hex 32" in env_text and "secrets.token_hex(32)" in env_text


# What each service may keep of the default capabilities: postgres's entrypoint starts as root, fixes the
# ownership of its folders and switches to the postgres user; every other service needs none.
_CAPABILITIES_KEPT = {"ledger-db": {"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"}}
SERVICES = ("livekit", "search", "ledger-db", "ledger-migrate", "agent", "web")


def _default(value: object) -> str:
    """`${VAR:-default}` -> default; anything else as written."""
    m = re.fullmatch(r"\$\{[A-Z_][A-Z0-9_]*:-([^}]*)\}", str(value))
    return m.group(1) if m else str(value)


def _bytes(size: str) -> int:
    m = re.fullmatch(r"(\d+)([kmg]?)b?", size.lower())
    assert m, f"not a size: {size}"
    return int(m.group(1)) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[m.group(2)]


@pytest.mark.parametrize("name", SERVICES)
def test_service_root_filesystem_is_read_only_with_a_tmpfs_for_tmp(name: str) -> None:
    service = _compose()["services"][name]
    assert service.get("read_only") is True
    assert any(str(t).split(":")[0] == "/tmp" for t in service.get("tmpfs", [])), "no writable /tmp"


@pytest.mark.parametrize("name", SERVICES)
def test_service_drops_every_capability_it_does_not_need(name: str) -> None:
    service = _compose()["services"][name]
    assert service.get("cap_drop") == ["ALL"]
    assert set(service.get("cap_add", [])) == _CAPABILITIES_KEPT.get(name, set())


@pytest.mark.parametrize("name", SERVICES)
def test_service_cannot_gain_privileges(name: str) -> None:
    assert "no-new-privileges:true" in _compose()["services"][name].get("security_opt", [])


@pytest.mark.parametrize("name", SERVICES)
def test_service_has_memory_and_cpu_limits(name: str) -> None:
    """Service-level limits, which `docker compose` applies without swarm (unlike some `deploy` keys)."""
    service = _compose()["services"][name]
    assert 128 * 2**20 <= _bytes(_default(service["mem_limit"])) <= 8 * 2**30
    assert 0 < float(_default(service["cpus"])) <= 8


def test_agent_metrics_folder_is_an_owner_only_tmpfs_of_the_image_user() -> None:
    """The worker refuses a PROMETHEUS_MULTIPROC_DIR others can write to: Compose gives it one only its user can."""
    agent = _compose()["services"]["agent"]
    folder = agent["environment"]["PROMETHEUS_MULTIPROC_DIR"]
    mounts = {str(t).split(":", 1)[0]: str(t).partition(":")[2] for t in agent["tmpfs"]}
    options = dict(o.split("=", 1) for o in mounts[folder].split(","))
    runtime_user = re.search(r"useradd [^&]*--uid (\d+)", DOCKERFILE.read_text(encoding="utf-8"))
    assert runtime_user is not None
    assert options["uid"] == runtime_user.group(1) and options["mode"] == "0700"


def test_agent_job_limit_follows_its_container_limits() -> None:
    """~330 MB per conversation: the default job count must fit the default memory limit."""
    agent = _compose()["services"]["agent"]
    jobs = int(_default(agent["environment"]["LEXVOZ_MAX_JOBS"]))
    assert jobs * 330 * 2**20 + 200 * 2**20 <= _bytes(_default(agent["mem_limit"]))
    assert jobs <= 2 * float(_default(agent["cpus"]))


def test_the_search_service_writes_glosses_only_with_the_glosses_override() -> None:
    """The base file never gives the search service the OpenAI key (a search server that writes no glosses never
    holds it) but passes every gloss setting through; deploy/compose.glosses.yml turns the writing on and adds the
    key, required, to the search service alone."""
    from panama_law.settings import ServerSettings

    base = _compose()["services"]
    search_env = base["search"]["environment"]
    assert "OPENAI_API_KEY" not in search_env and "PANAMA_LAW_WRITE_GLOSSES" not in search_env
    for name in sorted(f"PANAMA_LAW_{f.upper()}" for f in ServerSettings.model_fields if f.startswith("gloss_")):
        assert name in search_env and search_env[name] is None, f"{name} is not passed through to the search service"
    override = yaml.safe_load((ROOT / "deploy" / "compose.glosses.yml").read_text(encoding="utf-8"))
    assert set(override["services"]) == {"search"}
    env = override["services"]["search"]["environment"]
    assert env["PANAMA_LAW_WRITE_GLOSSES"] == "true"
    assert env["OPENAI_API_KEY"].startswith("${OPENAI_API_KEY:?")
    assert "OPENAI_BASE_URL" in env and env["OPENAI_BASE_URL"] is None
    merged = {**search_env, **env}
    assert ServerSettings.model_validate({"write_glosses": merged["PANAMA_LAW_WRITE_GLOSSES"]}).write_glosses
