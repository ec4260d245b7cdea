"""Growth marker records: written by `splitstate expand`, never given to a processor function.

A marker has no key and the header ``splitstate.marker`` = ``<topic>/<count>/<child>``; its
offset in the parent partition of ``child`` is the threshold of ``child`` (see
``framework.growth.expand``). Anyone who may write to an input topic can write such a record,
so a processor trusts a marker only when the topic registry records its growth
(``unrecorded_marker``): ``expand`` records the growth's count, then each parent's end offset
(``fence_ends``), and only then writes the markers, then records their offsets as thresholds.
"""

from __future__ import annotations

from typing import Any

from framework.coordination.registry import Growth
from rebalance import TopicHistory, parent

__all__ = ["MARKER_HEADER", "is_marker", "marker_fence", "marker_growth", "unrecorded_marker"]

#: Header naming the growth a marker record belongs to.
MARKER_HEADER = "splitstate.marker"

_SHOWN = 100  # bytes of a header value a reason shows


def is_marker(headers: Any) -> bool:
    """Whether a record with these headers is a growth marker (or claims to be one)."""
    return bool(headers) and any(name == MARKER_HEADER for name, _ in headers)


def marker_growth(topic: str, headers: Any) -> tuple[int, int] | None:
    """``(count, child)`` of the growth a marker of ``topic`` names (its only
    ``splitstate.marker`` header, ``topic/count/child``), or ``None`` for headers of another
    shape."""
    values = [value for name, value in headers or () if name == MARKER_HEADER]
    if len(values) != 1 or not isinstance(values[0], bytes):
        return None
    try:
        named, count, child = values[0].decode().rsplit("/", 2)
    except (UnicodeDecodeError, ValueError):
        return None
    if named != topic or not (_number(count) and _number(child)):
        return None
    return int(count), int(child)


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 9


def unrecorded_marker(  # noqa: PLR0911 - one return per way a marker can be refused
    where: tuple[str, int, int],
    headers: Any,
    history: TopicHistory | None,
    growth: Growth | None,
) -> str | None:
    """Why the marker at ``where`` (topic, partition, offset) is not the marker of a growth
    that the topic registry (``history``, and ``growth`` in progress, of the topic) records;
    ``None`` if it is: its growth created its child, split from this partition, and the
    registry records the child's threshold (``marker_fence``: where the child's keys end in
    the partition, whichever marker of the child this is: a resumed or a second concurrent
    `expand` writes one twice) or, the growth not done yet, its fence (``fence_ends``: no
    marker is written before it). The fence ends' offsets bound nothing: a second `expand`
    of the same growth records its own, past the first one's marker."""
    topic, partition, _offset = where
    found = marker_growth(topic, headers)
    if found is None:
        shown = [
            value[:_SHOWN] if isinstance(value, bytes) else value
            for name, value in headers
            if name == MARKER_HEADER
        ]
        return _refused(
            topic,
            f"its {MARKER_HEADER} header{'s' if len(shown) > 1 else ''} "
            f"{', '.join(repr(v) for v in shown)} {'are' if len(shown) > 1 else 'is'} not the "
            f"one header {topic}/<partition count>/<new partition> that `splitstate expand` "
            "writes",
        )
    count, child = found
    growth_text = f"a growth of {topic!r} to {count} partitions (its partition {child})"
    counts = () if history is None else history.counts
    if count not in counts[1:]:
        recorded = ", ".join(str(c) for c in counts) if counts else "none"
        return _refused(
            topic,
            f"it names {growth_text}, which the topic registry does not record (its partition "
            f"counts: {recorded})",
        )
    assert history is not None
    before = counts[counts.index(count) - 1]
    if not before <= child < count:
        return _refused(
            topic,
            f"it names {growth_text}, but that growth created partitions {before}..{count - 1}",
        )
    up = parent(child, history.initial_partitions)
    if up != partition:
        return _refused(
            topic,
            f"it names {growth_text}, which was split from {topic}[{up}], not from "
            f"{topic}[{partition}] where this record is",
        )
    if child in history.thresholds:
        return None  # its fence is the registry's threshold (``marker_fence``)
    if growth is None or growth.partitions != count or growth.fence_ends is None:
        return _refused(
            topic,
            f"the topic registry records {growth_text}, but not yet its fence, which "
            "`splitstate expand` records before it writes the markers",
        )
    return None


def marker_fence(
    where: tuple[str, int, int], count: int, child: int, history: TopicHistory | None
) -> tuple[int, int, int]:
    """The fence ``(child, count, threshold)`` of a recorded marker (``unrecorded_marker`` is
    ``None``) at ``where``: the registry's threshold of ``child`` if it records one, else the
    marker's own offset."""
    recorded = None if history is None else history.thresholds.get(child)
    return child, count, where[2] if recorded is None else recorded


def _refused(topic: str, why: str) -> str:
    return (
        f"unrecorded marker: a record without a key and with a {MARKER_HEADER} header, but "
        f"{why}. So it is no growth marker of `splitstate expand` and fences nothing: the "
        f"records after it are judged as if it were not there. Fix: find what writes records "
        f"with a {MARKER_HEADER} header to {topic!r} (only `splitstate expand` may) and stop "
        "it; nothing else is needed."
    )
