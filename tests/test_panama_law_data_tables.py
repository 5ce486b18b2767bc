"""Domain tables (the lexicons, the foreign places) are data files with a stated source, not code.

These pin that the search's tables are read from `panama_law/data/` (change a line of a copy and the table
changes), that a malformed line is an error naming its file and line instead of a silent gap in a table, and that
no module of the search carries a table as a literal again.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from panama_law.retrieve import gazetteer, lexicon
from tests.python_source import parse

PACKAGE = Path(lexicon.__file__).resolve().parent.parent
DATA = PACKAGE / "data"

# A string literal this long, or a collection literal with this many strings, is a table: it belongs in a data file.
# Docstrings (and other bare string statements, which nothing reads) are exempt whatever their length; the longest
# rule word list today (`scope._ORIGIN`) spans 4 lines.
MAX_LITERAL_LINES = 6
MAX_LITERAL_STRINGS = 12


@pytest.fixture
def data_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the package's data files, which the two readers then read instead of the installed ones."""
    shutil.copytree(DATA, tmp_path / "data")
    monkeypatch.setattr(lexicon.resources, "files", lambda package: tmp_path)
    monkeypatch.setattr(gazetteer.resources, "files", lambda package: tmp_path)
    return tmp_path / "data"


def _replace_line(path: Path, old: str, new: str) -> int:
    """Replace the one line `old` of `path` with `new`; return its 1-based line number."""
    lines = path.read_text(encoding="utf-8").splitlines()
    number = lines.index(old)
    lines[number] = new
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return number + 1


def test_the_shipped_tables_are_the_data_files() -> None:
    assert lexicon.CONSTITUTION.table == lexicon.read_table("constitution_lexicon.txt")
    assert lexicon.EVERYDAY.table == lexicon.read_table("everyday_lexicon.txt")
    places, demonyms = gazetteer._countries()
    assert gazetteer.PLACES == places | gazetteer._names("foreign_cities.txt")
    assert gazetteer.DEMONYMS == demonyms
    assert gazetteer.INSTITUTIONS == gazetteer._names("foreign_institutions.txt")
    # Multi-word names come out whole, wherever they sit on a line.
    assert {"ciudad de mexico", "tel aviv", "jerusalen", "carolina del norte", "rio de janeiro"} <= gazetteer.PLACES


def test_a_changed_line_of_the_constitution_lexicon_changes_the_table(data_copy: Path) -> None:
    _replace_line(data_copy / "constitution_lexicon.txt", "pais, paisito = nación estado república", "paisito = canal")
    table = lexicon.read_table("constitution_lexicon.txt")
    assert table["paisito"] == "canal"
    assert "pais" not in table


def test_a_changed_line_of_the_countries_changes_the_places(data_copy: Path) -> None:
    _replace_line(
        data_copy / "foreign_countries.txt",
        "peru | peruano peruana peruanos peruanas | lima",
        "peru | peruano | lima/cusco",
    )
    places, demonyms = gazetteer._countries()
    assert "cusco" in places and "peruano" in demonyms and "peruana" not in demonyms


@pytest.mark.parametrize(
    ("filename", "line", "bad"),
    [
        ("constitution_lexicon.txt", "pais, paisito = nación estado república", "pais, paisito nación estado"),
        ("constitution_lexicon.txt", "pais, paisito = nación estado república", "pais = nación = estado"),
        ("everyday_lexicon.txt", None, "la bulla ="),
        ("foreign_countries.txt", "peru | peruano peruana peruanos peruanas | lima", "peru | peruano peruana"),
        ("foreign_cities.txt", "Estados Unidos | miami", "Estados Unidos miami"),
        ("foreign_institutions.txt", "Estados Unidos | uscis", "Estados Unidos | uscis | irs"),
    ],
)
def test_a_malformed_line_is_an_error_naming_the_file_and_line(
    data_copy: Path, filename: str, line: str | None, bad: str
) -> None:
    path = data_copy / filename
    if line is None:  # the first entry of the file
        line = next(x for x in path.read_text(encoding="utf-8").splitlines() if x and not x.startswith("#"))
    number = _replace_line(path, line, bad)
    with pytest.raises(ValueError, match=rf"^{filename}, line {number}: "):
        if filename.endswith("lexicon.txt"):
            lexicon.read_table(filename)
        elif filename == "foreign_countries.txt":
            gazetteer._countries()
        else:
            gazetteer._names(filename)


def _table_literals(source: str) -> list[str]:
    tree = parse(source)
    # A bare string statement is documentation (a docstring, or a note under an assignment): nothing reads it.
    notes = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in notes:
            if node.value.count("\n") + 1 > MAX_LITERAL_LINES:
                found.append(f"line {node.lineno}: a string of {node.value.count(chr(10)) + 1} lines")
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            strings = sum(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
            if strings > MAX_LITERAL_STRINGS:
                found.append(f"line {node.lineno}: a collection of {strings} strings")
    return found


def test_the_literal_check_finds_a_table_and_spares_a_docstring() -> None:
    table = "\n".join(f"key{i} = term{i}" for i in range(10))
    names = ", ".join(f'"name{i}"' for i in range(20))
    source = f'"""Doc.\n{table}\n"""\n_TABLE = """\n{table}\n"""\n"""Note.\n{table}\n"""\n_NAMES = ({names})\n'
    assert _table_literals(source) == ["line 13: a string of 12 lines", "line 37: a collection of 20 strings"]


def test_no_module_of_the_search_holds_a_table_literal() -> None:
    found = {
        path.name: literals
        for path in sorted((PACKAGE / "retrieve").glob("*.py"))
        if (literals := _table_literals(path.read_text(encoding="utf-8")))
    }
    assert found == {}
