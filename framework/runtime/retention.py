"""Refusing to read on past records that retention deleted before a processor read them.

When a processor starts reading a partition it needs every record from where its state stops
(its stored offset) or, with no local state but consumer group progress, from offset 0 (the
state is rebuilt without output up to the committed offset). If Kafka's earliest retained
offset (the low watermark) is past that, those records are gone: reading on would leave them
out of the state for good, so the processor stops with ``ProcessorStoppedError`` instead of
letting the consumer jump to the earliest offset.

A partition the app has never read (no state, no committed offset) starts at the earliest
retained record, as a Kafka consumer with ``auto.offset.reset=earliest`` does; that it lost
a prefix is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from framework.kafka import KafkaConsumer
from framework.processing import ProcessorStoppedError
from rebalance.positions import Position

__all__ = ["check_catch_up_history", "check_retained"]

log = logging.getLogger(__name__)


def check_retained(
    processor: int,
    consumer: KafkaConsumer,
    starts: Mapping[Position, tuple[int | None, int | None]],
    grown: Collection[Position] = (),
) -> dict[Position, int | None]:
    """Raise ``ProcessorStoppedError`` when Kafka no longer holds records ``processor`` needs;
    else return the offset each partition starts at: the state's, 0 for a rebuild or a grown
    partition never read, ``None`` (the earliest retained record when it is first fetched)
    for a partition the app never read. Reading from explicit offsets (with
    ``reset="error"``) makes records deleted after this check stop the processor too, instead
    of making the consumer skip them.

    ``starts`` maps each partition about to be read to (the state's next offset, the
    consumer group's committed offset), either ``None`` when there is none. ``grown``: the
    partitions a growth created; the app has read every record of them, so one never read
    yet must still start at offset 0.
    """
    lost: list[str] = []
    firsts: dict[Position, int | None] = {}
    for (topic, partition), (stored, committed) in sorted(starts.items()):
        low = consumer.watermarks([(topic, partition)])[(topic, partition)].start
        where = f"{topic}[{partition}]"
        never_read = stored is None and committed is None and (topic, partition) not in grown
        firsts[(topic, partition)] = stored if stored is not None else None if never_read else 0
        if stored is not None:
            if low > stored:
                lost.append(
                    f"{where} resumes at offset {stored} but Kafka holds it only from offset {low}"
                )
        elif committed is not None:
            if low > 0:
                lost.append(
                    f"{where} must be rebuilt from offset 0 (no local state) up to the group's "
                    f"committed offset {committed} but Kafka holds it only from offset {low}"
                )
        elif low > 0 and (topic, partition) in grown:
            lost.append(
                f"{where} was created by a growth of the app's input and never read yet, "
                f"but Kafka holds it only from offset {low}"
            )
        elif low > 0:
            log.warning(
                "processor %d: %s starts at offset %d, the earliest Kafka still holds: records "
                "before it were deleted before the app first read the partition, and the state "
                "will never include them (as with auto.offset.reset=earliest). Scaling by "
                "replay needs them; see `splitstate status`.",
                processor,
                where,
                low,
            )
    if lost:
        raise ProcessorStoppedError(
            f"processor {processor} cannot read on: {'; '.join(lost)}. Kafka no longer holds "
            "these records: retention deleted records the processor has not read. Reading on "
            "would leave them out of the state for good, so it stops. Fix: rebuild the state "
            "from an archive that holds them (`splitstate backfill MODULE:APP --source parquet "
            "PATH --replace`), or accept the loss by starting the app over (remove its state "
            "directories and delete its consumer group); and keep the whole input history "
            "(retention.ms=-1 on input topics, what `splitstate topics create` sets)."
        )
    return firsts


def check_catch_up_history(
    consumer: KafkaConsumer,
    processor: int,
    generation: int,
    reads: Mapping[Position, tuple[int, int | None]],
) -> dict[Position, int]:
    """The partitions a catch-up must still read, each from its progress; ``reads`` maps each
    S2 partition to (its progress, its bound: ``None`` for S1 or an unknown threshold). An
    ancestor read to its bound already (or with bound 0, empty at the growth) needs nothing
    more: neither checked nor read, so retention deleting its records does not stop the
    catch-up. Raises ``ProcessorStoppedError`` when Kafka lost records still needed."""
    lost: list[str] = []
    needed: dict[Position, int] = {}
    for position, (start, bound) in reads.items():
        if bound is not None and start >= bound:
            continue
        needed[position] = start
        low = consumer.watermarks([position])[position].start
        if low > start:
            lost.append(f"{position[0]}[{position[1]}] starts at offset {low}")
    if lost:
        consumer.close()
        raise ProcessorStoppedError(
            f"processor {processor} cannot rebuild the keys it gains in generation "
            f"{generation}: their history is no longer complete in Kafka ("
            f"{'; '.join(lost)}: retention deleted earlier records). Building state from "
            "partial history would be wrong, so it stops. Fix: keep the whole history "
            "(retention.ms=-1 on input topics of stateful apps), or bootstrap from a "
            "Parquet archive (bootstrap: spark with spark.archive)."
        )
    return needed
