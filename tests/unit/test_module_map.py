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
