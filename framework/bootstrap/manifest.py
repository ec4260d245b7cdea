"""The manifest of a finished bootstrap: per processor, its SST files and covered offsets.

``manifest.json`` is written last into a bootstrap's directory; a directory without it is
not a finished bootstrap. File paths are relative to the directory, so it can be moved.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.bootstrap.crash_watch import SkippedInFold
from framework.bootstrap.errors import BootstrapError
from framework.input_times import GROWTH_BASE_SCOPE, GROWTH_LIFE_SCOPE, ORDER_SCOPE
from rebalance.positions import Position

__all__ = ["MANIFEST_FILE", "Manifest", "ManifestError", "TargetState"]

MANIFEST_FILE = "manifest.json"
_FORMAT = 1


class ManifestError(BootstrapError):
    """A bootstrap directory is unfinished or damaged."""


@dataclass
class TargetState:
    """One processor's built state: SST files per store, key count, offsets covered, and
    (an app that orders its inputs canonically) each partition's mark at its offset, to be
    stored with it in the progress scope ``input_times.ORDER_SCOPE``, and each growth
    child's ``(last life's start, base)`` (``bases``), kept in ``GROWTH_BASE_SCOPE`` and
    ``GROWTH_LIFE_SCOPE`` as the live loop keeps one it found (``progress``)."""

    files: dict[str, list[str]]
    keys: int
    offsets: dict[Position, int]
    marks: dict[Position, int] = field(default_factory=dict)
    bases: dict[Position, tuple[int, int]] = field(default_factory=dict)

    def progress(self) -> dict[str, dict[Position, int]] | None:
        """What ``ProcessorDatabase.bulk_load`` records with the offsets (``progress``):
        the marks in ``ORDER_SCOPE`` and the growth bases, if any."""
        found: dict[str, dict[Position, int]] = {}
        if self.marks:
            found[ORDER_SCOPE] = dict(self.marks)
        if self.bases:
            found[GROWTH_LIFE_SCOPE] = {p: start for p, (start, _) in self.bases.items()}
            found[GROWTH_BASE_SCOPE] = {p: base for p, (_, base) in self.bases.items()}
        return found or None


@dataclass
class Manifest:
    """What a bootstrap built; ``skipped``: the records it skipped (and ticks' items it
    dropped) because they killed the fold's process ``crash_limit`` times (as the
    processors skip them)."""

    targets: dict[int, TargetState]
    records_read: int = 0
    #: records folded into state; the dead-lettered ones (not applied) are counted apart
    records_applied: int = 0
    records_dead_lettered: int = 0
    directory: Path | None = field(default=None, compare=False)
    skipped: list[SkippedInFold] = field(default_factory=list)

    def files(self, processor: int) -> dict[str, list[Path]]:
        """Absolute SST paths per store for ``processor``."""
        if self.directory is None:
            raise ManifestError("the manifest was not read from a directory")
        target = self.targets[processor]
        return {
            store: [self.directory / name for name in names]
            for store, names in target.files.items()
        }

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON-able values."""
        return {
            "format": _FORMAT,
            "records_read": self.records_read,
            "records_applied": self.records_applied,
            "skipped": [s.json() for s in self.skipped],
            "records_dead_lettered": self.records_dead_lettered,
            "targets": {
                str(j): {
                    "files": target.files,
                    "keys": target.keys,
                    "offsets": [[t, p, o] for (t, p), o in sorted(target.offsets.items())],
                    "marks": [[t, p, m] for (t, p), m in sorted(target.marks.items())],
                    "bases": [[t, p, s, b] for (t, p), (s, b) in sorted(target.bases.items())],
                }
                for j, target in sorted(self.targets.items())
            },
        }

    def write(self, directory: Path) -> None:
        """Write ``manifest.json`` into ``directory`` (durably: it marks the end)."""
        path = directory / MANIFEST_FILE
        with path.open("w") as handle:
            json.dump(self.to_json(), handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())

    @classmethod
    def read(cls, directory: Path) -> Manifest:
        """The manifest of a finished bootstrap in ``directory``."""
        path = directory / MANIFEST_FILE
        if not path.exists():
            raise ManifestError(
                f"{directory} has no {MANIFEST_FILE}: the bootstrap did not finish. Fix: run "
                "it again (unfinished output is never ingested)."
            )
        try:
            raw = json.loads(path.read_text())
            if raw.get("format") != _FORMAT:
                raise ManifestError(f"{path} has format {raw.get('format')}, expected {_FORMAT}")
            targets = {
                int(j): TargetState(
                    files={str(s): [str(n) for n in names] for s, names in t["files"].items()},
                    keys=int(t["keys"]),
                    offsets={(str(topic), int(p)): int(o) for topic, p, o in t["offsets"]},
                    marks={(str(topic), int(p)): int(m) for topic, p, m in t.get("marks", [])},
                    bases={
                        (str(topic), int(p)): (int(s), int(b))
                        for topic, p, s, b in t.get("bases", [])
                    },
                )
                for j, t in raw["targets"].items()
            }
            skipped = [SkippedInFold.read(fields) for fields in raw.get("skipped", [])]
        except (KeyError, TypeError, ValueError) as error:
            raise ManifestError(
                f"{path} is damaged ({error}). Fix: delete {directory} and bootstrap again."
            ) from error
        return cls(
            targets=targets,
            records_read=int(raw.get("records_read", 0)),
            records_applied=int(raw.get("records_applied", 0)),
            records_dead_lettered=int(raw.get("records_dead_lettered", 0)),
            directory=directory,
            skipped=skipped,
        )
