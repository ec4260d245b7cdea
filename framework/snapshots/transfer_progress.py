"""A snapshot transfer's progress, as its receiver last reported it (for ``status`` and the
supervisor's log).

The receiver rewrites ``progress.json`` in its transfer directory (at most once a second and
at every change of phase); the directory, and so the report, goes once the gained keys are
ingested, after which ``status`` shows the catch-up's T2 instead.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from statestore.owner_only import make_private_dirs

__all__ = ["TransferProgress", "copied_text", "read_transfer_progress", "transfer_directory"]

_BAR = 20
_FILE = "progress.json"


def copied_text(copied: int, total: int) -> str:
    """``copied`` of ``total`` bytes in the largest unit ``total`` fills at least once
    (``500 of 800 B``, ``11.7 of 23.3 KiB``)."""
    unit, scale = "B", 1
    for name, size in (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)):
        if total >= size:
            unit, scale = name, size
    if scale == 1:
        return f"{copied:,} of {total:,} B"
    return f"{copied / scale:,.1f} of {total / scale:,.1f} {unit}"


def transfer_directory(state_dir: Path, processor: int, generation: int) -> Path:
    """Where receiver ``processor`` copies and filters its sources' snapshots in
    ``generation``."""
    return state_dir / ".snapshots-staging" / f"transfer-{processor}-{generation}"


@dataclass
class TransferProgress:
    """Where one receiver's transfer is: ``phase`` is ``waiting`` (for a source's snapshot),
    ``copying``, ``filtering`` (keeping its gained keys) or ``ingesting``."""

    processor: int
    phase: str = "waiting"
    bytes_copied: int = 0
    bytes_total: int = 0
    keys_kept: int = 0
    waiting_for: list[int] = field(default_factory=list)
    started: float = 0.0
    updated: float = 0.0

    def render(self) -> str:
        """One line with a bar over the bytes of the snapshots found so far."""
        fraction = self.bytes_copied / self.bytes_total if self.bytes_total else 0.0
        filled = round(min(fraction, 1.0) * _BAR)
        bar = "#" * filled + "-" * (_BAR - filled)
        waiting = f", waiting for a snapshot of {self.waiting_for}" if self.waiting_for else ""
        return (
            f"processor {self.processor} snapshot transfer {self.phase:<9} [{bar}] "
            f"{copied_text(self.bytes_copied, self.bytes_total)} copied, "
            f"{self.keys_kept:,} keys kept{waiting}  {self.updated - self.started:.0f}s"
        )

    def write(self, directory: Path) -> None:
        """Replace ``directory/progress.json`` with this report."""
        make_private_dirs(directory)
        staged = directory / f".{_FILE}.tmp"
        staged.write_text(json.dumps(asdict(self)))
        os.replace(staged, directory / _FILE)


def read_transfer_progress(directory: Path) -> TransferProgress | None:
    """The report in ``directory`` (``None`` when there is none or it cannot be read)."""
    try:
        data = json.loads((directory / _FILE).read_text())
        return TransferProgress(
            int(data["processor"]),
            str(data["phase"]),
            int(data["bytes_copied"]),
            int(data["bytes_total"]),
            int(data["keys_kept"]),
            [int(j) for j in data["waiting_for"]],
            float(data["started"]),
            float(data["updated"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
