"""docs/architecture.md's module map names every top-level module and package of nsfleet."""

from __future__ import annotations

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
