"""Compaction-only tombstones: records a producer writes to a key's earlier partitions of a
compacted input, so that Kafka's log cleaner removes the key's stale values there.

After a growth (or a deletion) a key's new records go to another partition; its old values
stay in the partitions it had before, and compaction keeps the last of them forever. Once the
key is deleted in its new partition and compaction removed that too, a rebuild from the log
(a lost state directory, a catch-up replay, Spark) would find the old value and bring the key
back. So ``produce_placed`` also writes, to each earlier partition of the key, a tombstone
(the key, no value) with the header ``splitstate.compaction`` = ``<topic>/<step>`` (``step``:
the index of the partition count it was placed with in the topic's history). Such a record
exists only for compaction: every path that folds records (``RecordProcessor``) skips it
before anything else, with no state change, no output and no dead letter. A record with that
header and a value, or with a header of another shape, is no such tombstone: a dead letter
(stage ``placement``), never given to the processor function as a delete.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "COMPACTION_HEADER",
    "compaction_header",
    "compaction_refusal",
    "compaction_step",
    "has_compaction_header",
    "is_compaction_tombstone",
]

#: Header marking a compaction-only tombstone, ``<topic>/<step index>``.
COMPACTION_HEADER = "splitstate.compaction"

_SHOWN = 100  # bytes of a header value a reason shows

Headers = Sequence[tuple[str, bytes | None]]


def compaction_header(topic: str, step: int) -> tuple[str, bytes]:
    """The header of a compaction tombstone of ``topic`` placed at history step ``step``."""
    return COMPACTION_HEADER, f"{topic}/{step}".encode()


def has_compaction_header(headers: Headers | None) -> bool:
    """Whether a record with these headers carries a ``splitstate.compaction`` header."""
    if headers:
        for name, _value in headers:
            if name == COMPACTION_HEADER:
                return True
    return False


def compaction_step(topic: str, headers: Headers | None) -> int | None:
    """The step a compaction tombstone of ``topic`` names (its only ``splitstate.compaction``
    header, ``<topic>/<step>``), or ``None`` for headers of another shape."""
    values = [value for name, value in headers or () if name == COMPACTION_HEADER]
    if len(values) != 1 or not isinstance(values[0], bytes):
        return None
    try:
        named, step = values[0].decode().rsplit("/", 1)
    except (UnicodeDecodeError, ValueError):
        return None
    if named != topic or not (step.isascii() and step.isdigit() and len(step) <= 9):
        return None
    return int(step)


def is_compaction_tombstone(topic: str, headers: Headers | None, value: bytes | None) -> bool:
    """Whether a keyed record of ``topic`` is a compaction tombstone to skip: no value, and
    one well-formed ``splitstate.compaction`` header."""
    return value is None and compaction_step(topic, headers) is not None


def compaction_refusal(topic: str, headers: Headers, value: bytes | None) -> str | None:
    """Why a keyed record of ``topic`` with a ``splitstate.compaction`` header
    (``has_compaction_header``) is not a compaction tombstone (a dead letter, stage
    ``placement``); ``None`` if it is one, to skip."""
    if compaction_step(topic, headers) is None:
        shown = [
            value[:_SHOWN] if isinstance(value, bytes) else value
            for name, value in headers
            if name == COMPACTION_HEADER
        ]
        listed = ", ".join(repr(v) for v in shown)
        return (
            f"malformed compaction tombstone: its {COMPACTION_HEADER} header"
            f"{'s' if len(shown) > 1 else ''} {listed} {'are' if len(shown) > 1 else 'is'} not "
            f"the one header {topic}/<step> that splitstate's producers write. It was not "
            "processed (not as a delete either). Fix: find what writes records with a "
            f"{COMPACTION_HEADER} header to {topic!r} (only SplitstateProducer and splitstate "
            "apps' outputs may) and stop it; send the record again without that header."
        )
    if value is not None:
        return (
            f"compaction tombstone with a value: the record has a {COMPACTION_HEADER} header, "
            "which marks a tombstone splitstate's producers write only for Kafka's log cleaner "
            "(never with a value), but it holds a value. It was not processed. Fix: find what "
            f"writes records with a {COMPACTION_HEADER} header to {topic!r} (only "
            "SplitstateProducer and splitstate apps' outputs may) and stop it; send the record "
            "again without that header."
        )
    return None
