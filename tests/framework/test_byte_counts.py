"""Copied bytes are shown in a unit that fits the total (found by a new user: a 23 KiB
snapshot's transfer and download read "copying 0.0 of 0.0 MiB")."""

from __future__ import annotations

import pytest

from framework.snapshots.transfer_progress import TransferProgress, copied_text


@pytest.mark.parametrize(
    ("copied", "total", "text"),
    [
        (0, 0, "0 of 0 B"),
        (500, 800, "500 of 800 B"),
        (12_000, 23_820, "11.7 of 23.3 KiB"),
        (1 << 20, 4 << 20, "1.0 of 4.0 MiB"),
        (3 << 30, 5 << 30, "3.0 of 5.0 GiB"),
    ],
)
def test_copied_text_picks_the_unit_of_the_total(copied: int, total: int, text: str) -> None:
    assert copied_text(copied, total) == text


def test_a_small_transfer_shows_its_bytes() -> None:
    line = TransferProgress(2, "copying", 12_000, 23_820, 5, [], 0.0, 1.0).render()
    assert "11.7 of 23.3 KiB copied" in line, line
    assert "0.0 of 0.0" not in line
