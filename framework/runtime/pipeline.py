"""Pipelined batches: process the next batch while Kafka acknowledges the last ones.

Without it, every batch waits for Kafka to acknowledge its outputs (or to commit its
transaction) before the next is polled. With ``batch.in_flight`` above 1, up to that many
batches are processed ahead:

- each batch's state changes are *sealed* when its records are processed: staged in the
  database's value cache (``statestore.value_cache``) where later batches read them, and
  written to RocksDB, with its input offsets, only when it *commits*;
- under at-least-once a batch commits, oldest first, once Kafka acknowledged all its outputs
  and dead letters; then its offsets are committed to the group (T1), as without pipelining;
- under exactly-once the batches in flight share one Kafka transaction, committed when
  ``in_flight`` batches are in it, when the oldest is ``batch.max_wait_ms`` old, when the
  next batch could keep it open for ``TRANSACTION_BUDGET_SECONDS`` (a slow function), when
  the input is idle, or before any coordination (a scale, a growth, forgetting moved keys);
  the group's offsets go into it, and the batches' RocksDB writes follow its commit.

An app that keeps time writes its ticks (``framework.runtime.ticking``) with a batch: into
its transaction, or, under at-least-once, beside its outputs; while the input is idle, in a
transaction of their own (``idle``).

A crash loses only batches not committed: their records are read again from the state's
offsets, exactly as without pipelining. When something fails in flight (a transaction that
cannot commit, an output the broker refused for size) every batch in flight is dropped
(``discard``): the staged changes are forgotten, the consumer is sent back to the first record
of each dropped batch, and a size refusal's records are processed again one batch at a time
(the waiting writer sends a refused output again alone, or makes it a dead letter).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

from framework.clock import Clock
from framework.errors import SplitstateError
from framework.growth.placement import UNFENCED_SCOPE, UNPLACED_SCOPE
from framework.kafka import Message, ProducerFencedError, TransactionAbortableError
from framework.runtime.batches import BatchResult, BatchRunner, coordinates, first_offsets
from framework.runtime.delivery import refuse_in_transaction
from framework.runtime.forced_ticks import send_forced
from framework.runtime.recovery import committable
from framework.runtime.sending import Sending, send
from framework.runtime.transactions import TRANSACTION_SECONDS, abort_quietly, fenced
from rebalance.positions import Position
from statestore import StateBatch

__all__ = ["Pipeline"]

log = logging.getLogger(__name__)

_ACK_SECONDS = 60.0
#: how long a transaction may stay open here (a third of librdkafka's smallest
#: ``transaction.timeout.ms`` splitstate sets: a broker aborts one open for longer)
TRANSACTION_BUDGET_SECONDS = 20.0


@dataclass
class _InFlight:
    """A sealed batch waiting for Kafka."""

    batch: StateBatch
    result: BatchResult
    messages: list[Message]
    sending: Sending
    outputs: int
    dead: int
    started: float


class Pipeline:
    """Up to ``depth`` batches of ``runner`` in flight (see the module); ``max_wait``:
    seconds a transaction stays open at most while batches keep coming."""

    def __init__(self, runner: BatchRunner, depth: int, max_wait: float, clock: Clock) -> None:
        self._runner = runner
        self.depth = depth
        self._max_wait = max_wait
        self._clock = clock
        self._flights: deque[_InFlight] = deque()
        self._open = False  # a transaction begun and not committed
        self._opened = 0.0  # when it began
        self._last_batch_seconds = 0.0  # how long the last batch's records took
        #: positions whose records up to these offsets are processed one waiting batch at a
        #: time (the broker refused an output of theirs for size)
        self._waiting_until: dict[Position, int] = {}

    @property
    def in_flight(self) -> int:
        """Batches processed and not committed."""
        return len(self._flights)

    def accepts(self, messages: list[Message]) -> bool:
        """Whether ``messages`` may be processed in flight (else: wait for every batch in
        flight, then process them as one waiting batch)."""
        if self.depth <= 1 or self._runner.guard.suspects:
            return False
        if self._waiting_until:
            offsets = self._runner.database.offsets()
            self._waiting_until = {
                p: o for p, o in self._waiting_until.items() if offsets.get(p, 0) < o
            }
            for message in messages:
                topic, partition, offset = coordinates(message)
                if offset < self._waiting_until.get((topic, partition), -1):
                    return False
        return True

    def start(self, messages: list[Message]) -> None:
        """Process ``messages`` and send their outputs; the batch commits in ``settle``."""
        runner = self._runner
        began = self._clock.monotonic()
        batch, result, outputs, dead = runner.prepare(messages)
        self._last_batch_seconds = self._clock.monotonic() - began

        def source(where: tuple[str, int, int] | None) -> Message | None:
            for message in messages:
                if where == coordinates(message):
                    return message
            return None

        try:
            writes = outputs or dead or result.ticks or result.forced
            if runner.transactions is not None and writes and not self._open:
                self._begin()
            sending = send(runner.writer, outputs, dead, source)
            if runner.ticks is not None and result.ticks:  # (into the transaction, if any)
                producer = runner.writer.producer
                # counted after: a report served while waiting for queue room has counted
                # itself down (``pending += send(...)`` would read pending before the sends)
                sent = runner.ticks.send(producer, result.ticks, sending)
                sending.pending += sent
            ordering = runner.ordering  # (the canonical order's forced ticks, if any)
            if result.forced and ordering is not None:
                producer = runner.writer.producer
                forced = send_forced(
                    producer, result.forced, runner.app_id, sending, left_out=ordering.not_written
                )
                sending.pending += forced
        except BaseException:
            self._abandon(messages)
            raise
        batch.seal()
        flight = _InFlight(
            batch, result, messages, sending, len(outputs), len(dead), self._clock.monotonic()
        )
        self._flights.append(flight)

    def settle(self, *, wait: bool) -> list[BatchResult]:
        """Commit the batches Kafka has answered for, oldest first (``wait``: wait for the
        oldest); returns what each committed batch did."""
        if not self._flights:
            return []
        if self._runner.transactions is not None:
            now = self._clock.monotonic()
            due = (
                len(self._flights) >= self.depth
                or now - self._flights[0].started >= self._max_wait
                # the transaction stays open while the next batch is polled and processed:
                # commit it now if that could take it near the broker's transaction timeout
                or (
                    self._open
                    and now - self._opened + self._max_wait + 2 * self._last_batch_seconds
                    >= TRANSACTION_BUDGET_SECONDS
                )
            )
            return self._commit_transaction() if wait or due else []
        producer = self._runner.writer.producer
        producer.poll(0)
        results: list[BatchResult] = []
        while self._flights:
            oldest = self._flights[0]
            if not oldest.sending.done:
                if not wait:
                    break
                self._wait_for(oldest)
                wait = False
            if oldest.sending.failures:
                self._failed(oldest)
                break
            results.append(self._commit(self._flights.popleft()))
        return results

    def drain(self) -> list[BatchResult]:
        """Commit every batch in flight (waiting for Kafka)."""
        results: list[BatchResult] = []
        while self._flights:
            results.extend(self.settle(wait=True))
        return results

    def idle(self) -> list[BatchResult]:
        """Nothing to apply was read and nothing is in flight: write the ticks due
        (``framework.runtime.ticking``, and the canonical order's forced ticks:
        ``framework.runtime.ordering``) in a transaction of their own; returns the batch that
        wrote them, if any. One that cannot commit is decided again at the next interval (the
        records the merge holds stay there: such a batch applies none)."""
        runner = self._runner
        if self._flights:
            return []
        ordering, ticks = runner.ordering, runner.ticks
        forcing = ordering is not None and ordering.forcing_due(runner.reading.flowing)
        if not forcing and (ticks is None or not ticks.due()):
            return []
        try:
            result = runner.run([])
        except TransactionAbortableError as error:
            log.warning("processor %d: %s (ticks decided again)", runner.processor, error)
            return []  # (its forced ticks and offsets were dropped: BatchRunner._transact)
        return [result] if result.ticks or result.forced else []

    def discard(self, also: list[Message] | None = None) -> None:
        """Drop every batch in flight: forget their state changes and read their records
        (and ``also``: those of a batch not in flight yet) again from each partition's
        first one."""
        runner = self._runner
        if runner.ticks is not None:
            runner.ticks.dropped()
        runner.database.backend.discard_staged()
        progress = runner.database.progress
        runner.records.recount(progress(UNFENCED_SCOPE), progress(UNPLACED_SCOPE))
        dropped = [m for f in self._flights for m in f.messages]
        starts = first_offsets([*dropped, *(also or [])])
        if runner.ordering is not None:  # and the records the merge holds: from the state's
            starts = runner.ordering.rewind()
        self._flights.clear()
        consumer = runner.consumer
        assert consumer is not None
        for position, offset in starts.items():
            if position in runner.reading.owned:
                consumer.seek(position, offset)
        runner.reading.rewound(starts)  # a held partition's records come back: judged again

    # -- internals ---------------------------------------------------------------------------

    def _abandon(self, messages: list[Message]) -> None:
        """Sending ``messages``' batch failed: abort the open transaction
        (``ProcessorFencedError`` when the abort says the producer was fenced), drop every
        batch in flight, and read them and ``messages`` again."""
        try:
            if self._open and self._runner.transactions is not None:
                self._open = False
                abort_quietly(self._runner.transactions, self._runner.processor)
        finally:
            self.discard(also=messages)

    def _commit(self, flight: _InFlight) -> BatchResult:
        self._runner.commit(flight.batch, flight.result)
        result = flight.result
        result.outputs = flight.outputs - flight.sending.replaced
        result.dead_letters = flight.dead + flight.sending.replaced
        return result

    def _wait_for(self, flight: _InFlight) -> None:
        """Serve deliveries until Kafka answered for every record of ``flight``."""
        producer = self._runner.writer.producer
        deadline = self._clock.monotonic() + _ACK_SECONDS
        while not flight.sending.done:
            if self._clock.monotonic() > deadline:
                raise SplitstateError(
                    f"outputs could not be written ({flight.sending.pending} unacknowledged "
                    f"after {_ACK_SECONDS:.0f}s); the batch was not committed and will be "
                    "processed again after a restart"
                )
            producer.poll(0.05)

    def _failed(self, flight: _InFlight) -> None:
        """At-least-once: a record of ``flight`` was not written."""
        failures = flight.sending.failures
        other = [str(e) for e in failures if not e.too_large]
        if other:
            raise SplitstateError(
                f"outputs could not be written (errors: {other[:3]}); the batch was not "
                "committed and will be processed again after a restart"
            )
        for message in [m for f in self._flights for m in f.messages]:
            topic, partition, offset = coordinates(message)
            position = (topic, partition)
            self._waiting_until[position] = max(offset + 1, self._waiting_until.get(position, 0))
        log.warning(
            "processor %d: Kafka refused a record for its size; the batches in flight are "
            "processed again, one waiting batch at a time (%s)",
            self._runner.processor,
            failures[0],
        )
        self.discard()

    def _begin(self) -> None:
        transactions = self._runner.transactions
        assert transactions is not None
        try:
            transactions.begin()
        except ProducerFencedError as error:
            raise fenced(self._runner.processor, error) from None
        self._open = True
        self._opened = self._clock.monotonic()

    def _committed(self) -> None:
        """The transaction committed, the batches' state not yet: the crash tests' points."""
        fault = self._runner.fault
        fault("batch:transaction-committed")
        if any(flight.result.ticks for flight in self._flights):
            fault("tick:written")
        if any(flight.result.ticks_read for flight in self._flights):
            fault("tick:read")

    def _commit_transaction(self) -> list[BatchResult]:
        """Exactly-once: commit the transaction of every batch in flight (outputs, dead
        letters, the group's offsets), then their state; a failure aborts it and drops them
        (``TransactionAbortableError``: they are processed again)."""
        runner = self._runner
        transactions, consumer = runner.transactions, runner.consumer
        assert transactions is not None and consumer is not None
        next_offsets: dict[Position, int] = {}
        for flight in self._flights:
            next_offsets.update(flight.result.next_offsets)
        offsets = committable(runner.reading.restore_below, next_offsets)
        try:
            if offsets and not self._open:
                self._begin()
            if self._open:
                try:
                    remaining = runner.writer.producer.flush(_ACK_SECONDS)
                    failures = [e for f in self._flights for e in f.sending.failures]
                    refuse_in_transaction(failures, [])
                    if remaining:
                        raise TransactionAbortableError(
                            f"{remaining} outputs were not acknowledged in {_ACK_SECONDS:.0f}s; "
                            "the transaction is aborted and its batches processed again"
                        )
                    if offsets:
                        transactions.send_offsets(offsets, consumer)
                    transactions.commit(TRANSACTION_SECONDS)
                except ProducerFencedError:
                    raise
                except BaseException:
                    abort_quietly(transactions, runner.processor)
                    raise
        except ProducerFencedError as error:
            self._open = False
            self.discard()
            raise fenced(runner.processor, error) from None
        except BaseException:
            self._open = False
            self.discard()
            raise
        if self._open:
            self._open = False
            self._committed()
        results = []
        while self._flights:
            results.append(self._commit(self._flights.popleft()))
        return results
