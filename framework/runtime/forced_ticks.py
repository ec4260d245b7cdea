"""Writing the forced ticks of the canonical order (``framework.runtime.ordering``).

A forced tick is an ordinary tick (``framework.time.ticks``: keyless, or a compacted topic's
tick key; headers ``{"floor", "wall", "app", "steps"}``) that says it was forced
(``FORCED_HEADER``: every reader, this processor after a restart too, knows nothing waits for
it), written into the batch's transaction (or, under at-least-once, beside its outputs). It is
written apart from the time ticks' ``TickWriter``: that writer's "a tick of mine is still
unread" is about its own ticks, and a forced tick waiting in the merge buffer must not stop it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from framework.kafka import (
    DeliveryError,
    KafkaProducer,
    Message,
    UnknownPartitionError,
)
from framework.runtime.ticking import Tick, produce_tick, write_ticks
from framework.time.ticks import tick_headers

if TYPE_CHECKING:
    from framework.runtime.ordering import InputOrder

__all__ = ["send_forced", "write_forced", "write_forced_ticks"]

log = logging.getLogger(__name__)

Report = Callable[[DeliveryError | None, Message], None]


def send_forced(
    producer: KafkaProducer,
    ticks: Iterable[Tick],
    app_id: str,
    on_delivery: Report | None = None,
    *,
    left_out: Callable[[Tick], None] | None = None,
) -> int:
    """Hand ``ticks`` of app ``app_id`` to ``producer`` without waiting (``on_delivery`` is
    told of each); returns how many. A partition the producer does not know yet is looked up
    once; still unknown, its tick is left out and ``left_out`` told (``InputOrder.not_written``:
    decided again when due)."""
    count = 0
    for tick in ticks:
        headers = tick_headers(tick.floor, tick.wall, app_id, steps=tick.steps, forced=True)
        try:
            produce_tick(producer, tick, headers, on_delivery)
        except UnknownPartitionError:
            if producer.partition_count(tick.topic) <= tick.partition:
                log.info("no forced tick to %s[%d] yet: unknown", tick.topic, tick.partition)
                if left_out is not None:
                    left_out(tick)
                continue
            produce_tick(producer, tick, headers, on_delivery)
        count += 1
    return count


def write_forced(
    producer: KafkaProducer,
    ticks: list[Tick],
    app_id: str,
    *,
    transactional: bool,
    left_out: Callable[[Tick], None] | None = None,
) -> None:
    """Produce ``ticks`` and wait for Kafka (raising, inside a transaction
    ``TransactionAbortableError``, when one was not written; ``left_out`` as for
    ``send_forced``)."""
    if ticks:
        send = lambda report: send_forced(  # noqa: E731
            producer, ticks, app_id, report, left_out=left_out
        )
        write_ticks(producer, send, "forced ticks", transactional)


def write_forced_ticks(
    order: InputOrder | None, producer: KafkaProducer, ticks: list[Tick], *, transactional: bool
) -> None:
    """Write the forced ``ticks`` ``order`` decided for a batch (none without an order) and
    wait for Kafka (``framework.runtime.forced_ticks.write_forced``); one left out is decided
    again (``InputOrder.not_written``)."""
    if order is not None and ticks:
        app_id, left_out = order.app_id, order.not_written
        write_forced(producer, ticks, app_id, transactional=transactional, left_out=left_out)
