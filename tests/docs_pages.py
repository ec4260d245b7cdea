"""The documentation's pages as the tests read them: README.md and every page under docs/,
their code blocks (with the ``<!-- snippet: ... -->`` marker each may carry), their relative
links and their headings' anchors (as MkDocs' ``toc`` extension makes them), both read from the
page as the site shows it: with the parts ``tools/docs_hooks.py`` generates filled in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from markdown.extensions.toc import slugify

from tools.docs_hooks import on_page_markdown

__all__ = [
    "DOCS",
    "ROOT",
    "CodeBlock",
    "anchors",
    "code_blocks",
    "markers",
    "page_file",
    "pages",
    "relative_links",
    "section",
]

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: a fenced block, at a line's start or indented (in a list item): its indent, language, code
_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```\n", re.MULTILINE | re.DOTALL)
_MARKER = re.compile(r"<!-- snippet: (compile-only.*?) -->\n\Z")
_ANY_MARKER = re.compile(r"<!-- snippet: (.*?) -->")
_FILE = re.compile(r"^<!-- snippet: file (\S+) -->$", re.MULTILINE)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its language, code, line in the page, and its marker (or ``""``)."""

    language: str
    code: str
    line: int
    marker: str

    @property
    def compile_only(self) -> bool:
        """Marked ``<!-- snippet: compile-only, WHY -->``: compiled, never run."""
        return self.marker.startswith("compile-only")


def pages() -> list[Path]:
    """README.md and every Markdown page of the docs site."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def code_blocks(page: Path) -> list[CodeBlock]:
    """The page's fenced code blocks, in order."""
    text = page.read_text()
    blocks = []
    for match in _FENCE.finditer(text):
        before = _MARKER.search(text, 0, match.start())
        indent = match[1]
        blocks.append(
            CodeBlock(
                language=match[2],
                code="".join(
                    line.removeprefix(indent) for line in match[3].splitlines(keepends=True)
                ),
                line=text.count("\n", 0, match.start()) + 1,
                marker=before[1] if before else "",
            )
        )
    return blocks


def page_file(page: Path) -> Path:
    """The ``__file__`` a page's Python blocks run as: its ``<!-- snippet: file PATH -->``
    (relative to the checkout), else the page itself."""
    found = _FILE.findall(page.read_text())
    assert len(found) <= 1, f"{page}: more than one snippet file marker"
    return ROOT / found[0] if found else page


def _prose(page: Path) -> str:
    """The page as the site shows it (generated parts filled in) without its code blocks."""
    return _FENCE.sub("", on_page_markdown(page.read_text()))


def relative_links(page: Path) -> list[str]:
    """The page's links outside code blocks that are not web addresses."""
    return [
        link
        for link in _LINK.findall(_prose(page))
        if not re.match(r"^[a-z]+:", link)  # http:, https:, mailto:
    ]


def anchors(page: Path) -> set[str]:
    """The ids its headings get (Python-Markdown's ``toc`` slugs of their text)."""
    return {slugify(re.sub(r"[`*]", "", title), "-") for title in _HEADING.findall(_prose(page))}


def section(page: Path, title: str) -> str:
    """A page's text from the heading ``## title`` to the next ``## `` heading."""
    text = page.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def markers(page: Path) -> list[str]:
    """Every ``<!-- snippet: ... -->`` marker of the page, as written."""
    return _ANY_MARKER.findall(page.read_text())
