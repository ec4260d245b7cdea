"""Errors of the state store; each message names the problem and the fix."""

from __future__ import annotations

__all__ = [
    "BatchStateError",
    "StateStoreError",
    "StoreConflictError",
    "StoreCorruptError",
    "StoreLockedError",
]


class StateStoreError(Exception):
    """A state store problem the user can act on."""


class StoreLockedError(StateStoreError):
    """The state directory is in use by another live process."""


class StoreConflictError(StateStoreError):
    """The state directory belongs to another app, processor or fixed parameters."""


class StoreCorruptError(StateStoreError):
    """The state directory is damaged or half-written; nothing was deleted."""


class BatchStateError(StateStoreError):
    """A batch was used after it was committed or aborted."""
