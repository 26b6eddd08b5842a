"""docs/architecture.md's module map names every top-level module and package of nsfleet, and
no public class name stands for two things."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_module_map_names_every_top_level_module_and_package() -> None:
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    package = REPO / "nsfleet"
    names = {p.stem for p in package.glob("*.py") if not p.stem.startswith("__")}
    names |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()}
    missing = sorted(n for n in names if f"`{n}`" not in section)
    assert missing == []


def test_the_module_map_names_every_module_of_every_package() -> None:
    """Each package's row names each of its modules (a newcomer finds a file by its job)."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines()
            if line.startswith("| `")}
    missing = []
    for package in sorted(p for p in (REPO / "nsfleet").iterdir() if (p / "__init__.py").exists()):
        row = rows.get(f"`{package.name}/`", "")
        missing += [f"{package.name}/{m.stem}" for m in sorted(package.glob("*.py"))
                    if not m.stem.startswith("__") and f"`{m.stem}`" not in row]
    assert missing == []


def test_no_public_class_name_is_defined_twice() -> None:
    """A class name says which concept it is, wherever it is imported from."""
    defined: dict[str, list[str]] = {}
    for path in sorted((REPO / "nsfleet").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                defined.setdefault(node.name, []).append(str(path.relative_to(REPO)))
    assert {name: where for name, where in defined.items() if len(where) > 1} == {}


def test_no_class_over_300_lines_and_no_function_over_80() -> None:
    """Small parts with one job each: a class or function past these has grown two."""
    big = []
    for path in sorted((REPO / "nsfleet").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            limit = (300 if isinstance(node, ast.ClassDef) else
                     80 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None)
            if limit is not None and node.end_lineno is not None and (
                    node.end_lineno - node.lineno + 1 > limit):
                big.append(f"{path.relative_to(REPO)}: {node.name}")
    assert big == []
