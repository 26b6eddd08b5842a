"""Every relative link in README.md, docs/*.md and bench/README.md resolves: the file exists
and, for a `#fragment`, the page has a heading whose GitHub anchor is that fragment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "bench" / "README.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (
                fragment and dest.suffix == ".md" and fragment not in anchors(dest)):
            broken.append(target)
    assert not broken, broken


def test_the_anchor_rule_matches_githubs() -> None:
    assert anchor("NameServer configuration (codes 318 / 319)") == (
        "nameserver-configuration-codes-318--319")
    assert anchor("Redis away: routes still answered") == "redis-away-routes-still-answered"
