"""Fault injection for crash tests: kill a processor at an exact step of the catch-up protocol.

Set ``SPLITSTATE_FAULT`` to a comma-separated list of ``J:before:EVENT`` or ``J:after:EVENT``
(EVENT one of the handoff events, e.g. ``2:after:CAUGHT_UP,0:after:RELEASE``), or of snapshot
points: ``J:snapshot:copying`` (a source mid-upload), ``J:snapshot:written`` (its manifest
just written), ``J:transfer:found``, ``J:transfer:copying``, ``J:transfer:ingesting`` (a
receiver's bulk load recorded, not yet ingested), ``J:transfer:ingested``, and
``J:pass-over:written`` (offsets moved past transaction markers in the state, not yet in the
group), or of batch points: ``J:batch:transaction-committed`` (a batch's transaction committed,
its state not yet), ``J:tick:written`` (the same, for a transaction that holds a tick the
processor wrote: ``framework.runtime.ticking``), ``J:tick:read`` (for a batch that read a tick).
Processor J then
SIGKILLs itself at that point, once: a marker file in the state directory keeps it from doing
so again after the supervisor restarts it. Unset (the default), nothing happens.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

__all__ = ["maybe_crash"]


def maybe_crash(point: str, processor: int, state_dir: Path) -> None:
    """SIGKILL this process if ``SPLITSTATE_FAULT`` names ``processor`` at ``point``."""
    spec = os.environ.get("SPLITSTATE_FAULT")
    if not spec:
        return
    for item in spec.split(","):
        who, _, when = item.strip().partition(":")
        if who.isdigit() and int(who) == processor and when == point:
            marker = state_dir / f".fault-{processor}-{point.replace(':', '-')}"
            if marker.exists():
                return
            state_dir.mkdir(parents=True, exist_ok=True)
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
