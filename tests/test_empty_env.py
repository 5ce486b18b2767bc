"""An empty environment variable is an unset one, for every setting of every program.

`export PANAMA_LAW_SOURCE=` left in the Makefile once became the path "." and the search server refused to build
its index ("unsupported file type"); an empty port made `make run` crash on `int("")`. Every field of every
settings class is checked here, so a setting added later is covered without anyone having to remember it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import Field, ValidationError, create_model
from pydantic_settings import BaseSettings

from agent.settings import Settings, SettingsError, StackSettings, get_settings
from panama_law.settings import ServerSettings
from realtime_standin.__main__ import parse_args

CLASSES: tuple[type[BaseSettings], ...] = (Settings, ServerSettings, StackSettings)


def _variable(cls: type[BaseSettings], name: str) -> str:
    """The environment variable pydantic-settings reads for a field: its alias, else prefix + name."""
    alias = cls.model_fields[name].alias
    return alias or f"{cls.model_config.get('env_prefix', '')}{name}".upper()


def _variables(cls: type[BaseSettings]) -> list[str]:
    return [_variable(cls, name) for name in cls.model_fields]


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No `.env` of the checkout and no variable of any settings class: each test sets exactly what it checks."""
    monkeypatch.chdir(tmp_path)
    for cls in CLASSES:
        for variable in _variables(cls):
            monkeypatch.delenv(variable, raising=False)
    get_settings.cache_clear()


def _outcome(cls: type[BaseSettings]) -> object:
    """The values the class reads, or its error (as a string, so two outcomes compare)."""
    try:
        return cls().model_dump()
    except (ValidationError, SettingsError) as exc:
        return f"error: {exc}"


FIELDS = [
    pytest.param(cls, name, id=f"{cls.__name__}.{_variable(cls, name)}") for cls in CLASSES for name in cls.model_fields
]


@pytest.mark.parametrize(("cls", "name"), FIELDS)
def test_an_empty_variable_reads_exactly_as_an_unset_one(
    monkeypatch: pytest.MonkeyPatch, cls: type[BaseSettings], name: str
) -> None:
    unset = _outcome(cls)
    assert not str(unset).startswith("error:"), f"the defaults alone do not load: {unset}"
    monkeypatch.setenv(_variable(cls, name), "")
    assert _outcome(cls) == unset


@pytest.mark.parametrize(
    ("cls", "name"), [p for p in FIELDS if p.values[0].model_config.get("env_file")]
)  # the classes that read `.env`
def test_an_empty_line_in_dotenv_reads_exactly_as_no_line(tmp_path: Path, cls: type[BaseSettings], name: str) -> None:
    unset = _outcome(cls)
    (tmp_path / ".env").write_text(f"{_variable(cls, name)}=\n", encoding="utf-8")
    assert _outcome(cls) == unset


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_required_setting_left_empty_is_reported_missing_as_when_unset(
    monkeypatch: pytest.MonkeyPatch, cls: type[BaseSettings]
) -> None:
    """None of today's settings is required; one added later must still fail clearly when its variable is empty."""
    variable = f"{cls.model_config.get('env_prefix') or 'LEXVOZ_'}REQUIRED_PROBE"
    field: Any = (str, Field(alias=variable)) if cls is not ServerSettings else (str, ...)
    probe = create_model(f"{cls.__name__}WithRequired", __base__=cls, required_probe=field)
    errors = []
    for value in (None, ""):
        if value is not None:
            monkeypatch.setenv(variable, value)
        with pytest.raises(ValidationError) as info:
            probe()
        errors.append([(e["type"], e["loc"]) for e in info.value.errors()])
    assert errors[0] == errors[1] == [("missing", (variable if cls is not ServerSettings else "required_probe",))]


STANDIN_VARIABLES = ("REALTIME_STANDIN_TRANSCRIPTS", "REALTIME_STANDIN_FALLBACK_TRANSCRIPT", "REALTIME_STANDIN_SPEED")


@pytest.mark.parametrize("variable", STANDIN_VARIABLES)
def test_the_standins_empty_variables_read_as_unset(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    for name in STANDIN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    unset = vars(parse_args([]))
    monkeypatch.setenv(variable, "")
    assert vars(parse_args([])) == unset


def test_the_standins_bad_speed_is_a_usage_error_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REALTIME_STANDIN_SPEED", "fast")
    with pytest.raises(SystemExit) as info:
        parse_args([])
    assert info.value.code == 2
    monkeypatch.setenv("REALTIME_STANDIN_SPEED", "2.5")
    assert parse_args([]).speed == 2.5
