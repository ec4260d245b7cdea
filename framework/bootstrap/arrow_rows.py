"""The records a fold takes, as Arrow columns and as rows ``RecordProcessor`` can process.

Records arrive as an Arrow table with the columns ``RECORD_COLUMNS`` and are decoded a column
(of up to ``CHUNK`` rows) at a time (``row_chunks``), never a row at a time through pandas;
each row is presented as confluent-kafka's ``Message`` presents a record (``ArrowMessage``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

__all__ = ["CHUNK", "RECORD_COLUMNS", "ArrowMessage", "header_lists", "row_chunks"]

#: rows decoded at a time
CHUNK = 10_000

#: the columns of the records a fold takes, in this order
RECORD_COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "headers")


class ArrowMessage(tuple[Any, ...]):
    """One record read by Spark, ``(topic, partition, offset, key, value, timestamp,
    headers)``, presented as confluent-kafka's ``Message`` presents one."""

    __slots__ = ()

    def topic(self) -> str:
        """The record's topic."""
        return self[0]  # type: ignore[no-any-return]

    def partition(self) -> int:
        """The record's partition."""
        return self[1]  # type: ignore[no-any-return]

    def offset(self) -> int:
        """The record's offset."""
        return self[2]  # type: ignore[no-any-return]

    def key(self) -> bytes | None:
        """The record's key."""
        return self[3]  # type: ignore[no-any-return]

    def value(self) -> bytes | None:
        """The record's value."""
        return self[4]  # type: ignore[no-any-return]

    def timestamp(self) -> tuple[int, int]:
        """``(type, epoch ms)`` as confluent-kafka gives it (type 0: none)."""
        stamp = self[5]
        return (0, 0) if stamp is None else (1, stamp)

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        """The record's headers (``None`` when it has none, as confluent-kafka says)."""
        return self[6]  # type: ignore[no-any-return]


def row_chunks(records: pa.Table) -> Iterator[tuple[int, Iterator[tuple[Any, ...]]]]:
    """The rows of ``records`` (``RECORD_COLUMNS``), ``CHUNK`` at a time, each chunk with
    the index of its first row."""
    for start in range(0, records.num_rows, CHUNK):
        chunk = records.slice(start, CHUNK)
        columns = [chunk.column(name).to_pylist() for name in RECORD_COLUMNS[:-1]]
        columns.append(header_lists(chunk.column("headers")))
        yield start, zip(*columns, strict=True)


def header_lists(column: pa.Array | pa.ChunkedArray) -> list[list[tuple[str, bytes | None]] | None]:
    """Each row's headers as ``[(name, value), ...]``, ``None`` for none (null or empty),
    from a ``list<struct<key: string, value: binary>>`` column, decoded a field at a time."""
    lists = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not isinstance(lists, pa.ListArray):
        raise TypeError(f"headers must be a list<struct<key, value>> column, not {lists.type}")
    offsets = lists.offsets.to_pylist()  # into the whole child array, even of a slice
    first = offsets[0] if offsets else 0
    fields = lists.values.slice(first, (offsets[-1] - first) if offsets else 0)
    pairs = list(
        zip(fields.field("key").to_pylist(), fields.field("value").to_pylist(), strict=True)
    )
    found = [
        pairs[start - first : end - first] or None for start, end in itertools.pairwise(offsets)
    ]
    if lists.null_count:  # a null list's offsets need not be equal: say None explicitly
        for index, valid in enumerate(lists.is_valid().to_pylist()):
            if not valid:
                found[index] = None
    return found
