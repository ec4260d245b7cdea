"""The longest test files `make test` hands out first are test files that exist (a renamed or
removed one would silently go back to xdist's place for it)."""

from __future__ import annotations

from pathlib import Path

from tests.xdist_order import LONGEST_FILES

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_file_is_a_test_file() -> None:
    missing = [name for name in LONGEST_FILES if not (ROOT / name).is_file()]
    assert missing == []
    assert len(set(LONGEST_FILES)) == len(LONGEST_FILES)
    assert all(Path(name).name.startswith("test_") for name in LONGEST_FILES)
