"""The README stays a front page: under 200 lines, its links resolve, and the jar cache it
names is the code's (found by a new user: a jar cache the README placed elsewhere). Its
Python block runs with the docs' (tests/test_doc_snippets.py); the facts the docs hold are
checked in tests/test_docs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.jvm import cache_dir
from tests.docs_pages import ROOT, code_blocks

README = (ROOT / "README.md").read_text()


def test_the_readme_is_under_200_lines_with_a_first_example_and_the_two_commands() -> None:
    assert len(README.splitlines()) < 200
    assert "make demo" in README and "make test" in README and "## Requirements" in README
    (example,) = [b for b in code_blocks(ROOT / "README.md") if b.language == "python"]
    assert len(example.code.splitlines()) <= 25 and not example.compile_only
    assert "TestDriver" in example.code


def test_the_jar_cache_is_where_the_readme_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPLITSTATE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == (Path.home() / ".cache" / "splitstate").resolve()
    assert "`~/.cache/splitstate/jvm`" in README
    assert "`$XDG_CACHE_HOME/splitstate/jvm`" in README
    assert "`SPLITSTATE_CACHE_DIR`" in README
    make = (ROOT / "Makefile").read_text()
    assert "export SPLITSTATE_CACHE_DIR ?= $(CURDIR)/.cache" in make  # make's `.cache/jvm`
