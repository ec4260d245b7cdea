"""Growth marker records: written by `splitstate expand`, never given to a processor function.

A marker has no key and the header ``splitstate.marker``; its offset in a parent partition is
the threshold of the partition split from it (see ``framework.growth.expand``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MARKER_HEADER", "is_marker", "marker_child"]

#: Header naming the growth a marker record belongs to.
MARKER_HEADER = "splitstate.marker"


def is_marker(headers: Any) -> bool:
    """Whether a record with these headers is a growth marker."""
    return bool(headers) and any(name == MARKER_HEADER for name, _ in headers)


def marker_child(headers: Any) -> tuple[int, int] | None:
    """``(count, child)`` of a marker's growth (its header ``topic/count/child``), or ``None``
    for a record that is no marker or a header of another shape."""
    for name, value in headers or ():
        if name == MARKER_HEADER and isinstance(value, bytes):
            parts = value.decode(errors="replace").rsplit("/", 2)
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                return int(parts[1]), int(parts[2])
    return None
