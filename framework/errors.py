"""Errors that splitstate reports to its user: each names the problem and the fix."""

from __future__ import annotations

__all__ = ["SplitstateError"]


class SplitstateError(Exception):
    """A problem the user can fix; its message says what went wrong and what to do.

    The CLI prints these as one clear message (no traceback) and exits with status 2.
    """
