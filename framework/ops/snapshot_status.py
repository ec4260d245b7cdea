"""What ``splitstate status`` says about snapshots: each processor's newest (age, size,
offsets), and warnings when a restore from it would need records retention deleted, or is
about to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from framework.config import AppConfig
from framework.redaction import mask_url, scrub
from statestore import StateStoreError
from statestore.snapshot_manifest import SnapshotManifest
from statestore.snapshot_store import SnapshotStore, store_errors

__all__ = ["SnapshotReport", "collect_snapshots"]

Position = tuple[str, int]


@dataclass(frozen=True)
class SnapshotReport:
    """The snapshot store's view: per processor its newest snapshot (``None``: none yet)."""

    url: str
    newest: dict[int, SnapshotManifest | None]
    now: float
    interval: float
    #: a problem reading the store, if any
    error: str | None = None
    #: per input partition, the earliest offset Kafka holds, and its end offset
    retained: dict[Position, tuple[int, int]] = field(default_factory=dict)

    def render(self) -> list[str]:
        """Lines for the status report."""
        lines = ["", f"snapshots in {self.url}:"]
        if self.error is not None:
            return [*lines, f"  cannot read the store: {self.error}"]
        for processor, manifest in sorted(self.newest.items()):
            if manifest is None:
                lines.append(f"  processor {processor}: none yet")
                continue
            offsets = ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(manifest.offsets.items()))
            age = max(0.0, self.now - manifest.created)
            lines.append(
                f"  processor {processor}: {manifest.id}, {age:.0f}s old, {manifest.size:,} "
                f"bytes, generation {manifest.generation}, offsets {offsets or '-'}"
            )
            if age > 3 * self.interval:
                lines.append(
                    f"  warning: processor {processor}'s newest snapshot is {age:.0f}s old, more "
                    f"than 3 x snapshots.interval_seconds ({self.interval:.0f}s): is it running, "
                    "and can it write to the store? (its log says why an upload failed)"
                )
            lines.extend(self._retention_warnings(processor, manifest))
        return lines

    def _retention_warnings(self, processor: int, manifest: SnapshotManifest) -> list[str]:
        """Partitions whose earliest retained offset passed, or (once retention deleted
        anything) is within 10% of the range left before, the offset a restore from
        ``manifest`` starts at."""
        lines = []
        for position, offset in sorted(manifest.offsets.items()):
            start, end = self.retained.get(position, (0, 0))
            where = f"{position[0]}[{position[1]}]"
            if start > offset:
                lines.append(
                    f"  warning: a restore of processor {processor} from its newest snapshot "
                    f"needs {where} from offset {offset}, but Kafka holds it only from {start}: "
                    "take a snapshot now (`splitstate snapshot take`) and keep input retention "
                    "well above snapshots.interval_seconds"
                )
            elif start > 0 and end > offset and start > offset - (end - offset) // 10:
                lines.append(
                    f"  warning: retention of {where} is close to offset {offset}, where a "
                    f"restore of processor {processor} from its newest snapshot starts"
                )
        return lines


def collect_snapshots(
    config: AppConfig,
    processors: list[int],
    retained: Mapping[Position, tuple[int, int]],
    now: float,
) -> SnapshotReport | None:
    """The newest snapshot of each of ``processors`` (``None`` when snapshots are off)."""
    if not config.snapshots.enabled:
        return None
    url = mask_url(config.snapshot_url)
    interval = config.snapshots.interval_seconds
    try:
        store = SnapshotStore(config.snapshot_url, config.app_id)
        newest = {j: store.newest(j) for j in processors}
    except store_errors(StateStoreError) as error:
        return SnapshotReport(url, {}, now, interval, error=scrub(str(error)))
    return SnapshotReport(url, newest, now, interval, retained=dict(retained))
