"""What a benchmark runs in: a scratch directory and a broker (a local one, or one given)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from framework.ops.broker import LocalBroker

__all__ = ["scratch_and_broker"]


@contextmanager
def scratch_and_broker(bootstrap: str | None, prefix: str) -> Iterator[tuple[Path, str]]:
    """A new scratch directory and ``bootstrap`` (or a local broker started in the scratch
    directory); both stopped and removed afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    broker = None if bootstrap else LocalBroker(scratch / "broker")
    try:
        yield scratch, bootstrap or broker.start().bootstrap_servers  # type: ignore[union-attr]
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
