"""Writing and finding `splitstate expand`'s marker records in a partition (``markers`` says
what they name and who trusts them).

A resumed ``expand`` first looks for the marker it may have written before it stopped (from
the fenced end offset on), so that a step's marker is written once in the usual case; one
written twice is harmless (the registry records one of them, and processors take either).
"""

from __future__ import annotations

from collections.abc import Collection

import orjson

from framework.errors import SplitstateError
from framework.growth.markers import MARKER_HEADER, marker_key
from framework.kafka import (
    DeliveryError,
    Isolation,
    Kafka,
    KafkaIOError,
    KafkaProducer,
    Message,
    consume_ready,
)
from framework.records import readable_headers

__all__ = ["MarkerWriteError", "find_marker", "is_compacted", "write_marker"]

_FIND_SECONDS = 60


class MarkerWriteError(SplitstateError):
    """A marker could not be written (the broker refused it or did not answer)."""


def is_compacted(kafka: Kafka, topic: str) -> bool:
    """Whether ``topic``'s ``cleanup.policy`` includes ``compact`` (its markers need a key)."""
    policy = kafka.topic_configs([topic]).get(topic, {}).get("cleanup.policy") or ""
    return "compact" in [part.strip() for part in policy.split(",")]


def write_marker(
    producer: KafkaProducer,
    topic: str,
    partition: int,
    marker_id: str,
    about: int,
    *,
    compacted: bool,
) -> int:
    """Append marker ``marker_id`` to ``topic[partition]``; returns its offset. ``about``: the
    partition it fences (a grown child, or the deleted partition itself); ``compacted``: the
    topic is compacted, so the marker gets a key (``marker_key``)."""
    delivered: list[Message] = []
    errors: list[DeliveryError] = []

    def on_delivery(error: DeliveryError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            delivered.append(message)

    producer.produce(
        topic,
        orjson.dumps({"splitstate_marker": marker_id, "partition": about}),
        marker_key(marker_id, compacted),
        partition,
        headers=[(MARKER_HEADER, marker_id.encode())],
        on_delivery=on_delivery,
    )
    producer.flush(60)
    if errors or not delivered:
        raise MarkerWriteError(
            f"could not write the marker {marker_id!r} to {topic}[{partition}]: "
            f"{errors[:1] or 'timed out'}. Fix: check the broker, then run the same "
            "`splitstate expand` again (it resumes)."
        )
    offset = delivered[0].offset()
    assert offset is not None
    return offset


def find_marker(
    kafka: Kafka, topic: str, partition: int, start: int, marker_ids: Collection[str]
) -> int | None:
    """The offset of the first marker with one of ``marker_ids`` in ``topic[partition]`` at or
    after ``start`` (``None`` when there is none up to the partition's end, or retention
    deleted it: a new marker is as good, the fence held since).

    It reads ``read_committed`` up to the last stable offset, then, when a transaction is
    still open there, ``read_uncommitted`` from it to the high watermark: `expand` writes its
    markers outside transactions, so one past an open transaction is found too (a rerun
    writes no second marker). The partition's end may lie past its last record (transaction
    markers, aborted records): a search ends where the consumer got there. ``KafkaIOError``
    when it cannot get there within a minute: not knowing is never "none"."""
    position = (topic, partition)
    with kafka.consumer("splitstate-expand", isolation="read_uncommitted") as ends:
        high = ends.watermarks([position])[position]
    with kafka.consumer("splitstate-expand") as ends:
        stable = ends.watermarks([position])[position].end
    start = max(start, high.start)
    if high.end <= start:
        return None
    deadline = kafka.clock.monotonic() + _FIND_SECONDS
    wanted = {(MARKER_HEADER, marker_id.encode()) for marker_id in marker_ids}
    if start < stable:
        found = _scan(kafka, (topic, partition, start, stable), wanted, deadline, committed=True)
        if found is not None:
            return found
    if stable >= high.end:
        return None
    span = (topic, partition, max(start, stable), high.end)
    return _scan(kafka, span, wanted, deadline, committed=False)


def _scan(
    kafka: Kafka,
    span: tuple[str, int, int, int],
    wanted: set[tuple[str, bytes]],
    deadline: float,
    *,
    committed: bool,
) -> int | None:
    """The first marker among ``wanted`` in ``topic[partition]`` in ``[start, end)`` of
    ``span``, read ``read_committed`` or not (``KafkaIOError`` past ``deadline``)."""
    topic, partition, start, end = span
    position = (topic, partition)
    isolation: Isolation = "read_committed" if committed else "read_uncommitted"
    with kafka.consumer("splitstate-expand", isolation=isolation) as consumer:
        consumer.assign({position: start})
        while kafka.clock.monotonic() < deadline:
            for message in consume_ready(consumer, 1000, 0.5):
                offset = message.offset()
                if offset is not None and offset >= end:
                    return None
                headers = readable_headers(message) or ()
                if any(header in wanted for header in headers):
                    return offset
                if offset is not None and offset + 1 >= end:
                    return None
            reached = consumer.position(position)
            if reached is not None and reached >= end:
                return None
    raise KafkaIOError(
        f"searching {topic}[{partition}] from offset {start} to {end} for a marker took over "
        f"{_FIND_SECONDS}s (a slow broker, or a transaction left open there: its records stay "
        "unreadable until it commits or aborts, at most transaction.timeout.ms)"
    )
