"""The README is a user's guide that links to one page per topic in docs/: every relative link
in the README and in docs/ leads to a file of the checkout, every page in docs/ is linked from
the README, and the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _links(page: Path) -> list[Path]:
    return [(page.parent / target).resolve() for target in LINK.findall(page.read_text(encoding="utf-8"))
            if not re.match(r"[a-z]+://", target)]


def test_every_relative_link_leads_to_a_file():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [(page.name, str(target.relative_to(ROOT))) for page in pages for target in _links(page)
              if not target.exists()]
    assert broken == []


def test_every_docs_page_is_linked_from_the_readme():
    linked = set(_links(ROOT / "README.md"))
    assert [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked] == []


def test_the_readme_stays_a_guide_a_newcomer_reads():
    """Short enough to read through, and no paragraph or list item of release notes (before
    the split: 601 lines, items of up to 396 words); reference material goes to docs/."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    pieces = [item for block in prose.split("\n\n") if block.strip() and not block.lstrip().startswith("|")
              for item in re.split(r"\n- ", block)]
    longest = max(pieces, key=lambda piece: len(piece.split()))
    assert len(longest.split()) <= 150, longest[:200]
