"""Offsets a ``read_committed`` consumer passes over without a record.

An input written by a transactional producer (another app's exactly-once output) holds
transaction markers and, when a transaction aborted, its records: each takes an offset, and a
``read_committed`` consumer moves past them without delivering anything. A processor's state
offset is one past the last record it applied, so it stays *before* such offsets: below a
commit marker at the end of a partition, or with none at all on a partition that holds only
an aborted transaction, while Kafka's end offset (the last stable offset) is past them. Any
comparison of that state offset with the end then counts them as records not processed yet:
a release would wait for ever for them to be read, lag never reaches 0.

So wherever every record delivered so far has been applied, the state may say it is where the
consumer got to: the offsets between hold nothing to apply (Kafka Streams commits the
consumer's position for the same reason, KAFKA-6607).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from framework.clock import Clock
from framework.kafka import KafkaConsumer, TransactionAbortableError
from framework.runtime.clients import RunClients
from framework.runtime.recovery import committable
from framework.runtime.transactions import commit_offsets
from rebalance.positions import Position
from statestore import ProcessorDatabase

__all__ = ["PassOver", "passed_over", "passed_within"]

# the processor's lines keep the loop's logger name (they were written there)
log = logging.getLogger("framework.runtime.loop")
#: how often an idle or rebuilding processor moves its offsets over transaction markers and
#: aborted records its consumer passed
_PASS_OVER_SECONDS = 1.0


def passed_over(
    consumer: KafkaConsumer, positions: Iterable[Position], offsets: Mapping[Position, int]
) -> dict[Position, int]:
    """The consumer's position of each of ``positions`` that is past ``offsets`` (the state's
    next offsets; a partition without one has none): the offsets between were passed over
    without a record.

    Call it only where every record ``consumer`` delivered has been applied to what
    ``offsets`` describes (no batch in flight): a delivered record not applied yet would be
    passed over too. A partition whose position the consumer does not know (nothing fetched
    since it was assigned or sought) is left out.
    """
    passed: dict[Position, int] = {}
    for position in sorted(positions):
        reached = consumer.position(position)
        if reached is None:
            continue
        stored = offsets.get(position)
        if stored is None or reached > stored:
            passed[position] = reached
    return passed


def passed_within(
    consumer: KafkaConsumer,
    positions: Mapping[Position, int],
    limit: Callable[[Position], int | None],
    held: Callable[[Position], bool],
    firsts: Mapping[Position, int],
) -> dict[Position, int]:
    """A catch-up's offsets without a record: each of its ``positions`` moves, no further
    than its ``limit`` (how far it may be applied now: F or an ancestor's threshold may lie
    right after a transaction marker), to the first record its consumer delivered past it
    (``firsts``: kept to apply later, or fetched past where it may ever apply; records come
    in order, so nothing below that one is to be applied), else to where the consumer got
    (``passed_over``; not for a partition ``held`` says it paused or keeps records of: what
    the consumer delivered of it was dropped, or lies before its position)."""
    moved: dict[Position, int] = {}
    lagging = [p for p in positions if not held(p) and positions[p] < (limit(p) or 0)]
    reached = {**passed_over(consumer, lagging, positions), **firsts}
    for position, offset in reached.items():
        allowed = limit(position)
        target = offset if allowed is None else min(offset, allowed)
        if positions[position] < target:
            moved[position] = target
    return moved


class PassOver:
    """Moves processor ``processor``'s state offsets, and the group's, over the transaction
    markers and aborted records its consumer (of ``clients``) passed without a record.

    The state is written first, in both guarantees: no output depends on these offsets, and
    a state ahead of the group (a crash before the group's commit) only has the group's
    offset committed at the next start. The other order could leave the group ahead of a
    state with no offset at all, which reads as a lost state directory (a rebuild from
    offset 0, impossible after retention). Under exactly-once the group's offsets go through
    a transaction; one that cannot commit is tried again at the next pass,
    for the partitions the state has not moved on from since."""

    def __init__(
        self,
        processor: int,
        database: ProcessorDatabase,
        clients: RunClients,
        clock: Clock,
        *,
        fault: Callable[[str], None] = lambda _point: None,
    ) -> None:
        self.processor = processor
        self._database = database
        self._consumer = clients.consumer
        self._transactions = clients.transactions
        self._clock = clock
        self._fault = fault
        self._passed_at = 0.0
        #: offsets passed over whose transaction could not commit (tried again)
        self._unconfirmed: dict[Position, int] = {}

    def due(self, now: bool = False) -> bool:
        """Whether to follow now: ``now``, or a second after the last time."""
        clock_now = self._clock.monotonic()
        if not now and clock_now - self._passed_at < _PASS_OVER_SECONDS:
            return False
        self._passed_at = clock_now
        return True

    def follow(self, owned: Iterable[Position], restore_below: Mapping[Position, int]) -> None:
        """Move the offsets of ``owned`` (no batch in flight; ``restore_below``: partitions
        being rebuilt, whose group offset never goes below what it was)."""
        offsets = self._database.offsets()
        passed = passed_over(self._consumer, owned, offsets)
        if passed:
            batch = self._database.begin()
            for (topic, partition), offset in passed.items():
                batch.set_offset(topic, partition, offset)
            batch.commit()
            self._fault("pass-over:written")
        again = {p: o for p, o in self._unconfirmed.items() if offsets.get(p) == o}
        self._unconfirmed = {}
        commits = committable(restore_below, {**again, **passed})
        if not commits:
            return
        if self._transactions is None:
            self._consumer.commit(commits, asynchronous=True)
            return
        try:
            commit_offsets(self._transactions, self._consumer, commits, self.processor)
        except TransactionAbortableError as error:
            self._unconfirmed = commits
            log.warning("processor %d: %s (tried again later)", self.processor, error)
