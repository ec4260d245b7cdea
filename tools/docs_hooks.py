"""MkDocs hooks (``mkdocs.yml``: ``hooks``): a page's ``<!-- generated: NAME -->`` line becomes
the reference that ``framework.ops.reference`` generates from the code, and ``<!-- snippet:
... -->`` lines (read by ``tests/test_doc_snippets.py``) are dropped from the rendered page."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from framework.ops.reference import (
    cli_markdown,
    config_fields_markdown,
    control_records_markdown,
    handoff_phases_markdown,
)

__all__ = ["GENERATED", "on_page_markdown"]

#: what each ``<!-- generated: NAME -->`` line stands for
GENERATED: dict[str, Callable[[], str]] = {
    "config-fields": config_fields_markdown,
    "cli": cli_markdown,
    "control-records": control_records_markdown,
    "handoff-phases": handoff_phases_markdown,
}
_MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.MULTILINE)
_SNIPPET = re.compile(r"^<!-- snippet: .*-->\n", re.MULTILINE)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The page with its generated parts filled in; an unknown name fails the build."""

    def generate(match: re.Match[str]) -> str:
        return GENERATED[match[1]]()

    return _SNIPPET.sub("", _MARKER.sub(generate, markdown))
