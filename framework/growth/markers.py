"""Growth marker records: written by `splitstate expand`, never given to a processor function.

A marker has no key and the header ``splitstate.marker``; its offset in a parent partition is
the threshold of the partition split from it (see ``framework.growth.expand``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MARKER_HEADER", "is_marker"]

#: Header naming the growth a marker record belongs to.
MARKER_HEADER = "splitstate.marker"


def is_marker(headers: Any) -> bool:
    """Whether a record with these headers is a growth marker."""
    return bool(headers) and any(name == MARKER_HEADER for name, _ in headers)
