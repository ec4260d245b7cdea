"""Checked values of coordination records (pure): the field types every record schema is
built of, and how a record that does not fit its schema is reported.

Coordination records (the control log, the topic registry, the progress reports) are JSON
objects written by other processes: other processors, other versions of splitstate, tools,
or anyone who can write to the topic. Each record family has one schema, a set of pydantic
models of these types, and a record is read only through it. A value is taken as it is
written and never coerced: an integer is a JSON integer (not a string, a float or a
boolean) in its range, a text is a JSON string. So every reader, of any version, reads a
record the same way or finds it malformed at the same field.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import orjson
from pydantic import Field, StringConstraints, ValidationError
from pydantic import Strict as _Strict

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "MAX_PARTITIONS",
    "Count",
    "Index",
    "IndexKey",
    "MalformedRecordError",
    "Offset",
    "PartitionCount",
    "Seconds",
    "Signed64",
    "Text",
    "describe",
    "json_object",
    "shown",
]

#: Kafka numbers partitions with 32-bit integers, offsets with 64-bit ones
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: The most partitions a topic's count may name (``PartitionCount``). Kafka itself has no
#: per-topic limit below 2**31 - 1, but its advice is at most 200,000 partitions per cluster,
#: and one request creates at most 10,000 (KAFKA-17870); a record naming more was not written
#: by splitstate. Readers build per-partition structures from a count (a history's starts, its
#: survivors), so a larger count is refused before it is built, not read by running out of
#: memory.
MAX_PARTITIONS = 100_000

#: a number of something that exists at least once: processors, a format version, a time
Count = Annotated[int, _Strict(), Field(ge=1, le=INT32_MAX)]
#: a topic's partition count: at least 1, at most ``MAX_PARTITIONS``
PartitionCount = Annotated[int, _Strict(), Field(ge=1, le=MAX_PARTITIONS)]
#: a processor id, a partition, a generation
Index = Annotated[int, _Strict(), Field(ge=0, le=INT32_MAX)]
#: a Kafka offset, or a time in milliseconds
Offset = Annotated[int, _Strict(), Field(ge=0, le=INT64_MAX)]
#: a signed 64-bit number (a metadata hash)
Signed64 = Annotated[int, _Strict(), Field(ge=-INT64_MAX - 1, le=INT64_MAX)]
#: wall-clock or elapsed seconds (a JSON number; not infinite)
Seconds = Annotated[float, _Strict(), Field(allow_inf_nan=False)]
Text = Annotated[str, _Strict()]
#: a JSON object's key that names an ``Index`` (JSON keys are strings): plain decimal digits
IndexKey = Annotated[str, _Strict(), StringConstraints(pattern=r"^(0|[1-9][0-9]{0,9})$")]


class MalformedRecordError(ValueError):
    """A coordination record that is not of its family's shape; the message says where."""


def json_object(value: bytes) -> dict[str, Any]:
    """The JSON object ``value`` holds; ``MalformedRecordError`` when it holds no JSON, or
    JSON that is not an object."""
    try:
        record = orjson.loads(value)
    except orjson.JSONDecodeError as error:
        raise MalformedRecordError(f"it is not JSON ({error})") from None
    if not isinstance(record, dict):
        raise MalformedRecordError(f"it is JSON, but a {type(record).__name__}, not an object")
    return record


def describe(error: ValidationError, limit: int = 3) -> str:
    """What pydantic found wrong, one ``field: problem`` per fault (the first ``limit``)."""
    faults = []
    for fault in error.errors(include_url=False, include_input=False)[:limit]:
        where = ".".join(_part(part) for part in fault["loc"]) or "the record"
        faults.append(f"{where}: {fault['msg']}")
    more = error.error_count() - limit
    if more > 0:
        faults.append(f"and {more} more")
    return "; ".join(faults)


def shown(value: object, limit: int = 40) -> str:
    """``value`` for a message: its ``repr`` (control characters escaped), cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _part(part: str | int) -> str:
    """A field's name or index as text; a key written by whoever wrote the record (a topic
    name, any string) is quoted with its control characters escaped, and cut short."""
    text = str(part)
    if isinstance(part, int) or _PLAIN.fullmatch(text):
        return text
    return shown(text)


#: names shown as they are: field names, and the ``[key]`` pydantic puts after a bad key
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}|\[key\]")
