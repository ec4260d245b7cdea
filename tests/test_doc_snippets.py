"""Every code block of README.md and docs/ is checked, so no snippet rots: a page's Python
blocks run in order in one namespace (``__file__`` from the page's ``<!-- snippet: file PATH
-->``, the checkout as working directory); a block marked ``<!-- snippet: compile-only, WHY
-->`` (a broker, a library not installed here) is compiled only; JSON blocks parse. Shell
blocks are not run here (most need a broker), but each ``splitstate`` command line in them
must parse with the CLI's own parser."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from framework.ops.cli import build_parser
from tests.docs_pages import ROOT, code_blocks, markers, page_file, pages

_PYTHON_PAGES = [page for page in pages() if any(b.language == "python" for b in code_blocks(page))]


@pytest.mark.parametrize("page", _PYTHON_PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_the_pages_python_blocks_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"__file__": str(page_file(page)), "__name__": "docs_snippet"}
    for block in code_blocks(page):
        if block.language != "python":
            continue
        code = compile(block.code, f"{page.relative_to(ROOT)}:{block.line}", "exec")
        if not block.compile_only:
            exec(code, namespace)  # noqa: S102 - the documentation's own code


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_the_pages_json_blocks_parse_and_markers_say_why(page: Path) -> None:
    for marker in markers(page):  # a misspelt marker would let its block run, or not
        assert marker.startswith(("compile-only, ", "file ")), (page, marker)
    for block in code_blocks(page):
        where = f"{page.relative_to(ROOT)}:{block.line}"
        if block.compile_only:
            assert block.language == "python", f"{where}: only Python blocks are compiled"
        if block.language == "json":
            json.loads(block.code)


def test_python_blocks_are_run_not_only_compiled() -> None:
    """splitstate's own blocks run, but for a producer and a consumer (they need a broker);
    another tool's code (Quix, Faust, Bytewax: not installed here) is compiled only."""
    blocks = [b for page in _PYTHON_PAGES for b in code_blocks(page) if b.language == "python"]
    compiled_only = [b for b in blocks if b.compile_only]
    another_tools = [
        b
        for b in compiled_only
        if b.marker.endswith(" is not installed here") and "framework" not in b.code
    ]
    ours = len(compiled_only) - len(another_tools)
    assert len(blocks) >= 10 and ours <= 2, (len(blocks), ours)


#: placeholders the docs write for a number, and a number the parser takes for them
_NUMBERS = {"J": "0", "PORT": "9092", "P": "3", "S": "1", "N": "0"}


def _command_lines(page: Path) -> list[str]:
    """The ``splitstate`` command lines of the page's shell blocks (continuations joined)."""
    lines = []
    for block in code_blocks(page):
        if block.language in ("sh", "bash"):
            for line in block.code.replace("\\\n", " ").splitlines():
                command = line.split("#", 1)[0]
                if re.search(r"(^|[\s/])splitstate ", command):
                    lines.append(re.split(r"(?:^|[\s/])splitstate ", command, maxsplit=1)[1])
    return lines


@pytest.mark.parametrize(
    "page",
    [page for page in pages() if _command_lines(page)],
    ids=lambda page: str(page.relative_to(ROOT)),
)
def test_the_pages_splitstate_commands_parse(page: Path) -> None:
    """Each documented command line is one the CLI accepts (``[--x X]`` taken as given)."""
    parser = build_parser()
    for line in _command_lines(page):
        words = [
            _NUMBERS.get(word, word)
            for word in shlex.split(line.replace("[", " ").replace("]", " "))
        ]
        try:
            parser.parse_args(words)
        except SystemExit as exit_:
            pytest.fail(f"{page.relative_to(ROOT)}: `splitstate {line.strip()}` exits {exit_}")


def test_a_block_indented_in_a_list_item_is_collected_too(tmp_path: Path) -> None:
    """The collector read only fences at a line's start: a block in a list item went unrun."""
    page = tmp_path / "page.md"
    page.write_text(
        "- a step:\n\n    ```python\n    if True:\n        x = 1\n    ```\n\n"
        "```sh\nsplitstate --version\n```\n"
    )
    indented, shell = code_blocks(page)
    assert (indented.language, indented.code, indented.line) == (
        "python",
        "if True:\n    x = 1\n",
        3,
    )
    assert (shell.language, shell.code) == ("sh", "splitstate --version\n")
