"""The layout keeps its promises: roles in subpackages, imports one way, modules short enough to read.

For `agent/` the subpackages are roles; for the search server `panama_law/` they are stages (ingest, index,
retrieve, serve) on a shared base; research code beside them is never imported by either program.

These rules are what let the next engineer find where a rule lives; a change that breaks one fails here
instead of slowly eroding the structure.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.python_source import parse

AGENT = Path("agent")
MAX_MODULE_LINES = 400

# Lower layers never import higher ones. Separate programs (web, devstack) may use only the shared base.
LAYER = {"contract": 0, "stores": 0, "settings": 1, "ops": 2, "mcp": 3, "voice": 4, "waiting_rooms": 4, "worker": 5}
SHARED_BASE = ("settings", "contract", "stores")
SEPARATE = {"web", "devstack"}
ENTRY = {"__main__", "doctor"}  # command-line entries may reach every role


def _role(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "agent"


def _agent_imports(path: Path) -> set[str]:
    tree = parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("agent"):
            found.add(node.module if node.module != "agent" else f"agent.{node.names[0].name}")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("agent."))
    return found


def _modules() -> list[Path]:
    return sorted(p for p in AGENT.rglob("*.py"))


def _module_name(path: Path) -> str:
    return ".".join(path.with_suffix("").parts)


@pytest.mark.parametrize("path", _modules(), ids=str)
def test_imports_run_one_way(path: Path) -> None:
    mine = _role(_module_name(path))
    if mine in ENTRY or mine == "agent":
        return
    for target in _agent_imports(path):
        theirs = _role(target)
        if theirs == mine:
            continue
        if mine in SEPARATE:
            assert theirs in SHARED_BASE, f"{path} (a separate program) imports {target}"
        else:
            assert theirs not in SEPARATE and theirs not in ENTRY, f"{path} imports {target}"
            assert LAYER[theirs] < LAYER[mine], f"{path} ({mine}) imports {target} ({theirs}): a higher layer"


@pytest.mark.parametrize("package", sorted(p for p in AGENT.iterdir() if (p / "__init__.py").is_file()), ids=str)
def test_every_subpackage_says_what_it_owns(package: Path) -> None:
    doc = ast.get_docstring(parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc and len(doc) > 80, f"{package}/__init__.py needs a docstring saying what the package owns"


@pytest.mark.parametrize(
    "path", sorted(p for d in ("agent", "panama_law", "realtime_standin") for p in Path(d).rglob("*.py")), ids=str
)
def test_no_module_over_the_line_budget(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path} has {lines} lines; split it by concern"


# --- panama_law: split by stage ---------------------------------------------------------------------------------

PANAMA_LAW = Path("panama_law")
# A stage imports only the stages below it and the shared base (top-level modules, and the package itself).
STAGE = {"base": 0, "ingest": 1, "index": 2, "retrieve": 3, "serve": 4}
LAW_BASE = {"panama_law", "contract", "norms", "text", "embedding", "settings"}
LAW_ENTRY = {"__main__", "evaluate"}  # the command line's entries may reach every stage


def _law_stage(module: str) -> str | None:
    """The stage of a panama_law module (`entry` for the command line); None for a top-level module nobody placed."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in STAGE):
        return parts[1]
    name = parts[-1]
    if name in LAW_ENTRY:
        return "entry"
    return "base" if name in LAW_BASE else None


def _absolute_imports(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved; `from pkg import mod` names the module itself."""
    package = list(path.parent.parts)
    found: set[str] = set()
    for node in ast.walk(parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            origin = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                candidate = f"{origin}.{alias.name}"
                is_module = Path(*candidate.split(".")).with_suffix(".py").is_file()
                is_package = (Path(*candidate.split(".")) / "__init__.py").is_file()
                found.add(candidate if is_module or is_package else origin)
    return found


def _law_module_name(path: Path) -> str:
    parts = path.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _law_modules() -> list[Path]:
    return sorted(PANAMA_LAW.rglob("*.py"))


@pytest.mark.parametrize("path", _law_modules(), ids=str)
def test_search_server_imports_run_one_way_by_stage(path: Path) -> None:
    mine = _law_stage(_law_module_name(path))
    assert mine is not None, f"{path} is in no stage: move it into one, or name it in LAW_BASE if every stage needs it"
    if mine == "entry":
        return
    for target in sorted(t for t in _absolute_imports(path) if t.split(".")[0] == "panama_law"):
        theirs = _law_stage(target)
        if theirs == mine:
            continue
        assert theirs not in (None, "entry"), f"{path} imports {target}, a command-line entry"
        assert STAGE[theirs] < STAGE[mine], f"{path} ({mine}) imports {target} ({theirs}): a later stage"


@pytest.mark.parametrize(
    "package",
    sorted(p.parent for d in (PANAMA_LAW, Path("research")) for p in d.rglob("__init__.py") if p.parent != PANAMA_LAW),
    ids=str,
)
def test_every_search_server_stage_says_what_it_owns(package: Path) -> None:
    doc = ast.get_docstring(parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc and len(doc) > 80, f"{package}/__init__.py needs a docstring saying what the stage owns"


@pytest.mark.parametrize("program", ["panama_law", "agent"])
def test_programs_never_import_research(program: str) -> None:
    """Research (fitting runners, experiment logs) is not installed: a program importing it would break once
    installed, and would make the experiments part of the product."""
    offenders = [
        f"{path} imports {target}"
        for path in sorted(Path(program).rglob("*.py"))
        for target in sorted(_absolute_imports(path))
        if target.split(".")[0] == "research"
    ]
    assert not offenders, "\n".join(offenders)
