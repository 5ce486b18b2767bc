"""The layout keeps its promises: roles in subpackages, imports one way, modules short enough to read.

These rules are what let the next engineer find where a rule lives; a change that breaks one fails here
instead of slowly eroding the structure.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

AGENT = Path("agent")
MAX_MODULE_LINES = 400

# Lower layers never import higher ones. Separate programs (web, devstack) may use only the shared base.
LAYER = {"contract": 0, "stores": 0, "settings": 1, "ops": 2, "mcp": 3, "voice": 4, "worker": 5}
SHARED_BASE = ("settings", "contract", "stores")
SEPARATE = {"web", "devstack"}
ENTRY = {"__main__", "doctor"}  # command-line entries may reach every role


def _role(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "agent"


def _agent_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
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
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc and len(doc) > 80, f"{package}/__init__.py needs a docstring saying what the package owns"


@pytest.mark.parametrize(
    "path", sorted(p for d in ("agent", "panama_law", "realtime_standin") for p in Path(d).rglob("*.py")), ids=str
)
def test_no_module_over_the_line_budget(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path} has {lines} lines; split it by concern"
