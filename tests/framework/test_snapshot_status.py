"""The status lines about snapshots warn of retention only where retention deleted records."""

from __future__ import annotations

from framework.ops.snapshot_status import SnapshotReport
from statestore.snapshot_manifest import SnapshotManifest


def _report(offset: int, start: int, end: int) -> list[str]:
    manifest = SnapshotManifest("app", 1, {}, "m1", 100.0, 0, {("words", 1): offset})
    report = SnapshotReport(
        "store", {1: manifest}, 110.0, 300.0, retained={("words", 1): (start, end)}
    )
    return [line for line in report.render() if "warning" in line]


def test_nothing_deleted_is_no_warning() -> None:
    """A snapshot at offset 0 of a topic retention never touched (the demo showed a false
    'retention is close to offset 0')."""
    assert _report(offset=0, start=0, end=5000) == []
    assert _report(offset=300, start=0, end=5000) == []


def test_retention_near_or_past_a_restores_start_is_warned_of() -> None:
    [close] = _report(offset=1000, start=990, end=2000)
    assert "retention of words[1] is close to offset 1000" in close
    [past] = _report(offset=1000, start=1200, end=2000)
    assert "needs words[1] from offset 1000, but Kafka holds it only from 1200" in past
