"""The README and docs/ hold together: every relative link lands on a file of this repository
(and on a heading there, when it names one), and the README stays a ten-minute read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", flags=re.MULTILINE)


def _prose(text: str) -> str:
    """The text without code blocks and code spans (a ``[a](b)`` in code is no link)."""
    return _CODE.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(h) for h in _HEADING.findall(_FENCE.sub("", page.read_text()))}


def relative_links(page: Path) -> list[str]:
    links = _LINK.findall(_prose(page.read_text()))
    return [link for link in links if not re.match(r"^[a-z][a-z0-9+.-]*:", link)]


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of ``page`` that leave ``root`` or land nowhere."""
    broken = []
    for link in relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        nowhere = not target.is_relative_to(root) or not target.exists()
        if nowhere or (anchor and target.suffix == ".md" and anchor not in _anchors(target)):
            broken.append(link)
    return broken


# Not named ``page``: that is Playwright's fixture, and sharing its name makes pytest interleave
# these tests with the browser tests.
@pytest.mark.parametrize("doc", PAGES, ids=lambda doc: str(doc.relative_to(ROOT)))
def test_every_relative_link_lands_on_a_file_of_the_repository(doc: Path) -> None:
    assert broken_links(doc) == []


def test_a_link_out_of_the_repository_or_to_a_missing_file_or_heading_is_broken(
    tmp_path: Path,
) -> None:
    repo, shared = tmp_path / "repo", tmp_path / "shared"
    (repo / "docs").mkdir(parents=True)
    shared.mkdir()
    (shared / "DESIGN.md").write_text("# Design\n")  # exists, but outside the repository
    (repo / "docs" / "architecture.md").write_text("# Architecture\n\n## The parts\n")
    page = repo / "docs" / "page.md"
    page.write_text(
        "[design](../../shared/DESIGN.md) [gone](nowhere.md) [here](architecture.md#no-such)\n"
        "[fine](architecture.md#the-parts) [web](https://example.com/) `[code](nowhere.md)`\n"
    )

    assert broken_links(page, root=repo) == [
        "../../shared/DESIGN.md",
        "nowhere.md",
        "architecture.md#no-such",
    ]


def test_the_readme_stays_a_ten_minute_read() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert re.findall(r"\brow \d", readme, flags=re.IGNORECASE) == []
