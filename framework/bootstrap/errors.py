"""The error a Spark bulk build reports to its user; each message names the problem and the fix."""

from __future__ import annotations

from statestore.errors import StateStoreError

__all__ = ["BootstrapError"]


class BootstrapError(StateStoreError):
    """A Spark bulk build failed or cannot run (Java, connector, archive, user function).

    A kind of ``StateStoreError``: the state a build writes is what failed to appear.
    """
