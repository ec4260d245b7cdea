"""The growth fence, checked on every consumed record: a keyed record must sit on the partition
its ``splitstate.count`` header (the count its producer placed it with) gives its key.

``SplitstateProducer`` and the runtime's outputs set the header. A record whose header places
it elsewhere is dead-lettered (stage ``placement``, reason ``misplaced ...``) and changes no
state: processing it would split its key's state across processors. Records without the header
come from producers that bypass the fence; they are processed, and counted per input partition
in the processor's state (``UNFENCED_SCOPE``) for ``splitstate status``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import mmh3

from framework.producer import COUNT_HEADER
from rebalance import level

__all__ = ["NO_COUNT_HEADER", "UNFENCED_SCOPE", "NoCountHeader", "count_header", "misplacement"]

#: Where a processor's state counts, per input partition, the records it processed without a
#: ``splitstate.count`` header (``StateBatch.set_progress`` / ``ProcessorDatabase.progress``).
UNFENCED_SCOPE = "unfenced"


class NoCountHeader:
    """The record has no ``splitstate.count`` header."""


NO_COUNT_HEADER = NoCountHeader()


def count_header(headers: Iterable[tuple[str, Any]] | None) -> str | bytes | NoCountHeader | None:
    """The last ``splitstate.count`` header's value (the last is the producer's own)."""
    found: str | bytes | NoCountHeader | None = NO_COUNT_HEADER
    for name, value in headers or ():
        if name == COUNT_HEADER:
            found = value
    return found


def misplacement(
    key: bytes, topic: str, partition: int, initial: int, placed: str | bytes | None
) -> str | None:
    """Why a keyed record whose ``splitstate.count`` header is ``placed`` may not be processed
    on ``partition`` of ``topic`` (``initial`` partitions at first); ``None`` if it sits where
    that count places its key: ``bucket(key_hash(key), initial, count)``."""
    layout = _layout(initial, placed)
    if layout is None:
        return (
            f"misplaced: its {COUNT_HEADER} header {placed!r} is not a partition count of "
            f"{topic!r} (at least its initial {initial}), so where its key belongs is unknown; "
            "the record was not processed. Fix: produce with SplitstateProducer, which sets it."
        )
    low, split, count = layout
    h = mmh3.hash(key, 0, False)  # bucket(key_hash(key), initial, count), inlined
    expected = h % low
    if expected < split:
        expected = h % (low << 1)
    if expected == partition:
        return None
    return (
        f"misplaced: placed with {count} partitions ({COUNT_HEADER} header), key {key!r} "
        f"belongs in {topic}[{expected}] (bucket(key_hash(key), {initial}, {count})), but the "
        f"record is in {topic}[{partition}]; processing it there would split the key's state "
        "across processors, so it was not processed. Fix: produce with SplitstateProducer "
        "(or place keys with bucket(key_hash(key), N, M) from the topic registry), then send "
        "the record again."
    )


@functools.lru_cache(maxsize=1024)
def _layout(initial: int, placed: str | bytes | None) -> tuple[int, int, int] | None:
    """``(low, split, count)`` of ``placed`` partitions grown from ``initial`` (as ``bucket``
    computes them); ``None`` when ``placed`` is not such a count."""
    try:
        count = int(placed) if placed is not None else -1
    except ValueError:
        return None
    if count < initial:
        return None
    low = initial << level(initial, count)
    return low, count - low, count
