"""``RecordFailedError``: a keyed record whose function (or its windows, or a join) failed,
as ``TimedFunctions.record`` raises it, each write of the key undone."""

from __future__ import annotations

__all__ = ["RecordFailedError"]


class RecordFailedError(Exception):
    """A record's function (or its windows) failed; its key's writes were undone.
    ``stage``: ``"late"``, ``"decode"`` or ``"processor"``; ``reason``: the dead letter's.
    A function may raise it itself (a join whose stored buffer is damaged: ``"decode"``);
    a timer's function that does is a dead letter of that stage, not ``"timer"``."""

    def __init__(self, stage: str, reason: str, cause: BaseException) -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason
        self.cause = cause
