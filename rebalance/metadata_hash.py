"""The metadata hash of KIP-1101: one number that changes when a topic's shape changes.

A topic's hash covers its id, name, partition count and each partition's racks, in the byte
layout Apache Kafka's group coordinator hashes (``Utils.computeTopicHash``; little-endian):
magic byte ``0x00``; the topic id's most- then least-significant 64 bits; the name as UTF-16LE
code units followed by an int32 count of them; the partition count as int32; then per
partition ``i`` in order: int32 ``i`` and, per rack in sorted order, int32 length followed by
the rack written like the name. A group's hash is 0 for no topics, else the hash of the
topics' hashes as int64 in topic-name order.

``murmur3`` (the KIP's text, our default) hashes the bytes with MurmurHash3 x64/128 and keeps
the first 64 bits; ``xxh3`` hashes them with XXH3-64, which is what Kafka 4.1+ computes, so
figures can be compared with a broker's.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping, Sequence

import mmh3
import xxhash

__all__ = ["group_hash", "topic_hash", "topic_hash_bytes"]

_MAGIC = b"\x00"
_INT32 = struct.Struct("<i")
_INT64 = struct.Struct("<q")


def _string(text: str) -> bytes:
    """A Java string as hash4j's ``putString`` feeds it: UTF-16LE code units, then their count."""
    units = text.encode("utf-16-le")
    return units + _INT32.pack(len(units) // 2)


def _java_order(text: str) -> bytes:
    """Sort key matching Java's ``String.compareTo`` (UTF-16 code units, not code points)."""
    return text.encode("utf-16-be")


def _digest(data: bytes, algorithm: str) -> int:
    if algorithm == "murmur3":
        return int(mmh3.hash64(data, 0, signed=True)[0])
    if algorithm == "xxh3":
        unsigned = xxhash.xxh3_64_intdigest(data, seed=0)
        return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned
    raise ValueError(f"unknown hash algorithm {algorithm!r}; use 'murmur3' or 'xxh3'")


def topic_hash_bytes(
    topic_id: uuid.UUID, name: str, partition_racks: Sequence[Iterable[str]]
) -> bytes:
    """The bytes a topic's hash is computed over (see the module docstring)."""
    msb, lsb = struct.unpack(">qq", topic_id.bytes)
    parts = [_MAGIC, _INT64.pack(msb), _INT64.pack(lsb), _string(name)]
    parts.append(_INT32.pack(len(partition_racks)))
    for index, racks in enumerate(partition_racks):
        parts.append(_INT32.pack(index))
        for rack in sorted(racks, key=_java_order):
            parts.append(_INT32.pack(len(rack.encode("utf-16-le")) // 2))
            parts.append(_string(rack))
    return b"".join(parts)


def topic_hash(
    topic_id: uuid.UUID,
    name: str,
    partition_racks: Sequence[Iterable[str]],
    algorithm: str = "murmur3",
) -> int:
    """A topic's metadata hash as a signed 64-bit integer.

    ``partition_racks[i]`` holds the racks of partition ``i``'s replicas (empty when the
    brokers have no ``broker.rack``); their order does not matter.
    """
    return _digest(topic_hash_bytes(topic_id, name, partition_racks), algorithm)


def group_hash(topic_hashes: Mapping[str, int], algorithm: str = "murmur3") -> int:
    """Combine topics' hashes in topic-name order; 0 for no topics. Signed 64-bit."""
    if not topic_hashes:
        return 0
    data = b"".join(
        _INT64.pack(topic_hashes[name]) for name in sorted(topic_hashes, key=_java_order)
    )
    return _digest(data, algorithm)
