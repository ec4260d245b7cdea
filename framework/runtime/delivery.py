"""Writing a batch's outputs and dead letters to Kafka, and records Kafka refuses for size.

``BatchWriter.write`` produces every output (placed under the output topics' registry lease)
and dead letter, and waits until Kafka has them all. It raises ``SplitstateError`` when one
cannot be written, so the batch is not committed and is processed again after a restart.

A record is too large for Kafka when it exceeds the producer's ``message.max.bytes`` (produce
raises ``MSG_SIZE_TOO_LARGE``) or the topic's ``max.message.bytes`` (the delivery report
says so). Such a record must not stop the processor (its batch would never commit), so:

- an output too large becomes a dead letter of the input record that produced it (stage
  ``output``, its value cut to the first 64 KiB), and the batch commits;
- a dead letter too large is replaced by one without the record's value and headers, that
  names the record's topic, partition and offset, the reason, and that the value was dropped.

Records are measured first against their topic's limit as the run began (``RecordLimits``,
and the producer's ``batch.size`` is kept below every limit): an output that cannot fit
becomes a dead letter, a dead letter that cannot fit its stand-in, before either is produced.
The broker can still refuse for size when a topic's limit was lowered since. Then, under
at-least-once, outputs refused are sent again one at a time, with every later output of their
partition (keeping each key's order; at-least-once output allows the repeats): only one
refused on its own is too large. Inside a transaction (exactly-once) a record the broker
refuses makes the whole transaction fail, so nothing is sent again: the processor stops
naming the fix; any other failure raises ``TransactionAbortableError`` (the batch is processed
again). Placement is computed when a record is handed to the producer, under a fresh lease:
after waiting for room in the producer's queue it is computed again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from framework.clock import Clock
from framework.errors import SplitstateError
from framework.growth.compaction_writes import CompactionTombstones
from framework.growth.lease import RegistryLease
from framework.growth.placement import COUNT_HEADER, LinearHashPartitioner, produce_placed
from framework.kafka import (
    DeliveryCallback,
    DeliveryError,
    KafkaProducer,
    Message,
    RecordTooLargeError,
    TransactionAbortableError,
)
from framework.processing import DeadLetter, EncodedOutput, InputMessage, ProcessorStoppedError
from framework.runtime.record_limits import RecordLimits, framed_size
from framework.runtime.size_letters import (
    MAX_DEAD_LETTER_VALUE,
    output_dead_letter,
    stripped_dead_letter,
)

__all__ = ["MAX_DEAD_LETTER_VALUE", "BatchWriter", "output_dead_letter", "stripped_dead_letter"]

log = logging.getLogger(__name__)

_FLUSH_SECONDS = 60.0
_WARN_EVERY_SECONDS = 10.0
#: the placement header an output gets, at its longest (for measuring outputs)
_COUNT_PLACEHOLDER = (COUNT_HEADER, b"9" * 10)
#: the framed size of a record without headers of its own, but its key and value
_PLAIN_FRAMING = framed_size(None, None, [_COUNT_PLACEHOLDER])

Where = tuple[str, int, int]
Source = Callable[[Where | None], InputMessage | None]


def _too_large(error: DeliveryError | None) -> bool:
    return error is not None and error.too_large


class _Report:
    """The delivery report of one record (an ``on_delivery`` callback)."""

    __slots__ = ("error", "letter")

    def __init__(self, letter: DeadLetter | None = None) -> None:
        self.letter = letter
        self.error: DeliveryError | None = None

    def __call__(self, error: DeliveryError | None, _message: Message) -> None:
        self.error = error


class BatchWriter:
    """Produces one batch's outputs and dead letters and waits for them (see the module).

    ``clock`` (the run's) spaces out the repeated warnings; ``limits``: each topic's record
    limit, to measure records against before producing them; ``transactional``: the records
    go into a transaction the caller opened and commits (see the module); ``tombstones``:
    which compaction tombstones of outputs to compacted topics were written (default: the
    last ``DEFAULT_TOMBSTONES_CACHED`` remembered).
    """

    def __init__(
        self,
        producer: KafkaProducer,
        lease: RegistryLease,
        dead_letter_topic: str,
        stopping: Callable[[], bool],
        clock: Clock,
        *,
        limits: RecordLimits | None = None,
        transactional: bool = False,
        tombstones: CompactionTombstones | None = None,
    ) -> None:
        self.producer = producer
        self._tombstones = CompactionTombstones() if tombstones is None else tombstones
        self._limits = limits
        self._smallest = 0 if limits is None else limits.smallest()
        self._transactional = transactional
        self._clock = clock
        self._lease = lease
        self._dead_letters = self.dead_letter_topic = dead_letter_topic
        self._stopping = stopping
        self._failed: list[tuple[DeliveryError, Message]] = []
        self._warned = {"lease": 0.0, "batch": 0.0}

    def write(
        self, outputs: list[EncodedOutput], dead: list[DeadLetter], source: Source
    ) -> list[DeadLetter]:
        """Write ``outputs`` and ``dead`` and wait for Kafka; returns the dead letters written
        for outputs too large (``source`` gives the input record at an output's origin)."""
        if not outputs and not dead:
            return []
        failed = self._failed
        failed.clear()

        def delivered(error: DeliveryError | None, message: Message) -> None:
            if error is not None:
                failed.append((error, message))

        refused: list[tuple[EncodedOutput, str]] = []
        for output in outputs:
            too_big = self.too_big(output.topic, output.key, output.value, output.headers)
            if too_big is not None:
                refused.append((output, too_big))
                continue
            # each output is placed with the lease's counts as they are when it is taken: a
            # renewal in the middle of the batch (or while an output waits for room) places
            # the rest with the new counts, never with the ones it replaced
            try:
                self.send_output(output, delivered)
            except RecordTooLargeError as error:
                refused.append((output, error.reason))
        reports = [self._send_letter(letter) for letter in dead]
        self._flush(failed)
        if self._transactional:
            refuse_in_transaction([e for e, _m in failed], reports)
        too_large = [(e, m) for e, m in failed if _too_large(e)]
        if too_large:
            refused.extend(self._resend(outputs, too_large, {id(o) for o, _ in refused}))
        self._settle(reports)
        letters = [output_dead_letter(o, why, source(o.origin)) for o, why in refused]
        if letters:
            for output, why in refused:
                log.warning(
                    "an output of %s[%d]@%d to %s is too large for Kafka (%s); the record goes "
                    "to the dead-letter topic %s",
                    *(output.origin or ("?", -1, -1)),
                    output.topic,
                    why,
                    self._dead_letters,
                )
            written = [self._send_letter(letter) for letter in letters]
            self._flush([])
            if self._transactional:
                refuse_in_transaction([], written)
            self._settle(written)
        return letters

    def partitioner(self) -> LinearHashPartitioner:
        """The output partitioner, once its lease is fresh (waiting, and serving deliveries,
        while it is not)."""
        lease = self._lease
        while not lease.fresh():
            if self._stopping():
                raise SplitstateError(
                    "stopped while the topic registry lease was stale; the batch was not "
                    "committed and will be processed again"
                )
            self._warn(
                "lease",
                "cannot re-read the topic registry within the output topics' lease; output "
                "waits (it could land on the wrong partition). Fix: make Kafka reachable.",
            )
            self.producer.poll(0.5)
        return lease.partitioner

    # -- sending ----------------------------------------------------------------------------

    def send_output(self, output: EncodedOutput, on_delivery: DeliveryCallback) -> None:
        """Produce ``output``, waiting for queue room; placed (and its count header taken)
        from the lease as it is when the producer takes it."""
        output.partition = produce_placed(
            self.producer,
            self.partitioner,
            output.topic,
            output.key,
            output.value,
            headers=output.headers,
            on_delivery=on_delivery,
            tombstones=self._tombstones,
        )

    def send_outputs(
        self, outputs: list[EncodedOutput], on_delivery: DeliveryCallback
    ) -> list[tuple[EncodedOutput, str]]:
        """Produce ``outputs`` without waiting, each as ``send_output`` does; returns those
        too large for their topic or the producer, with why."""
        refused: list[tuple[EncodedOutput, str]] = []
        for output in outputs:
            why = self.too_big(output.topic, output.key, output.value, output.headers)
            if why is not None:
                refused.append((output, why))
                continue
            try:
                self.send_output(output, on_delivery)
            except RecordTooLargeError as error:
                refused.append((output, error.reason))
        return refused

    def _send_letter(self, letter: DeadLetter) -> _Report:
        """Produce ``letter`` (or its stand-in when the producer refuses it as too large)."""
        report = _Report(letter)
        too_big = self.too_big(self._dead_letters, letter.key, letter.value, letter.kafka_headers())
        if too_big is not None:
            letter = report.letter = stripped_dead_letter(letter, self._dead_letters, too_big)
        try:
            self.produce_letter(letter, report)
        except RecordTooLargeError as error:
            report.letter = stripped_dead_letter(letter, self._dead_letters, error.reason)
            self.produce_letter(report.letter, report)
        return report

    def too_big(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[tuple[str, str | bytes | None]] | None,
    ) -> str | None:
        """Why a record would not fit ``topic`` (``None``: it fits, or nothing is measured)."""
        if self._limits is None:
            return None
        if not headers and _PLAIN_FRAMING + len(key or b"") + len(value or b"") <= self._smallest:
            return None  # the common case, measured without listing headers
        listed = [*(headers or ()), _COUNT_PLACEHOLDER]
        if self._limits.fits(topic, key, value, listed):
            return None
        size, limit = framed_size(key, value, listed), self._limits.limit(topic)
        return f"about {size} bytes, over the max.message.bytes {limit} of {topic!r}"

    def produce_letter(self, letter: DeadLetter, report: DeliveryCallback) -> None:
        """Produce ``letter`` as it is (waiting for queue room); ``RecordTooLargeError`` when
        the producer refuses it for size."""
        headers: list[tuple[str, str | bytes | None]] = [*letter.kafka_headers()]
        while True:
            try:
                self.producer.produce(
                    self._dead_letters,
                    letter.value,
                    letter.key,
                    headers=headers,
                    on_delivery=report,
                )
                return
            except BufferError:
                self.producer.poll(0.1)

    def _flush(self, failed: list[tuple[DeliveryError, Message]]) -> None:
        """Wait for every queued record; raise on any failure other than a size refusal."""
        remaining = self.producer.flush(_FLUSH_SECONDS)
        errors = [str(e) for e, _m in failed if not _too_large(e)]
        if (remaining or errors) and self._transactional:
            raise TransactionAbortableError(
                f"outputs could not be written ({remaining} unsent; errors: {errors[:3]}); the "
                "transaction is aborted and the batch processed again"
            )
        if remaining or errors:
            raise SplitstateError(
                f"outputs could not be written ({remaining} unsent; errors: {errors[:3]}); the "
                "batch was not committed and will be processed again after a restart"
            )

    # -- size refusals ----------------------------------------------------------------------

    def _resend(
        self,
        outputs: list[EncodedOutput],
        too_large: list[tuple[DeliveryError, Message]],
        unsent: set[int],
    ) -> list[tuple[EncodedOutput, str]]:
        """Send again, one at a time, the outputs of each partition from its first one the
        broker refused (not those the producer refused, ids in ``unsent``); returns those
        refused on their own."""
        refused: dict[tuple[str | None, int | None], set[tuple[bytes | None, bytes | None]]] = {}
        for _error, message in too_large:
            where = (message.topic(), message.partition())
            refused.setdefault(where, set()).add((message.key(), message.value()))
        again: list[EncodedOutput] = []
        started: set[tuple[str | None, int | None]] = set()
        for output in outputs:
            where = (output.topic, output.partition)
            if where in started or (
                where in refused and (output.key, output.value) in refused[where]
            ):
                started.add(where)
                if id(output) not in unsent:
                    again.append(output)
        alone: list[tuple[EncodedOutput, str]] = []
        for output in again:
            report = _Report()
            try:
                self.send_output(output, report)
            except RecordTooLargeError as error:
                alone.append((output, error.reason))
                continue
            self._flush([])
            if _too_large(report.error):
                assert report.error is not None
                alone.append((output, report.error.reason))
            elif report.error is not None:
                raise SplitstateError(
                    f"an output to {output.topic!r} could not be written ({report.error}); the "
                    "batch was not committed and will be processed again after a restart"
                )
        if len(alone) < len(too_large):
            self._warn(
                "batch",
                "Kafka refused a producer batch of outputs as too large although its records "
                "fit on their own: a topic's max.message.bytes is below the producer's "
                "batch.size, so such batches are sent again one record at a time. Fix: raise "
                "the topic's max.message.bytes, or set kafka.settings batch.size below it.",
            )
        return alone

    def _settle(self, reports: Iterable[_Report]) -> None:
        """Resolve dead letters the broker refused: alone, then as their small stand-in."""
        for report in reports:
            if report.error is None:
                continue
            if not _too_large(report.error):
                raise SplitstateError(
                    f"a dead letter could not be written ({report.error}); the batch was not "
                    "committed and will be processed again after a restart"
                )
            assert report.letter is not None
            why = report.error.reason
            report.error = None
            self.produce_letter(report.letter, report)  # alone now
            self._flush([])
            if _too_large(report.error):
                report.letter = stripped_dead_letter(report.letter, self._dead_letters, why)
                report.error = None
                self.produce_letter(report.letter, report)
                self._flush([])
            if report.error is not None:
                raise SplitstateError(
                    f"a dead letter could not be written ({report.error}), not even without "
                    f"its value; the batch was not committed. Fix: check the dead-letter topic "
                    f"{self._dead_letters!r} (its max.message.bytes)."
                )

    def _warn(self, what: str, message: str) -> None:
        now = self._clock.monotonic()
        if now - self._warned[what] > _WARN_EVERY_SECONDS:
            self._warned[what] = now
            log.warning(message)


def refuse_in_transaction(failed: list[DeliveryError], reports: list[_Report]) -> None:
    """Inside a transaction: stop on a record the broker refused for size (it cannot be sent
    again apart from the transaction it failed), retry the batch on any other failure."""
    errors = [*failed, *(r.error for r in reports if r.error is not None)]
    refused = [e for e in errors if e.too_large]
    if refused:
        raise ProcessorStoppedError(
            f"Kafka refused a record of this batch as too large for its topic ({refused[0]}) "
            "inside the batch's transaction, although it was measured against the topic's "
            "limit as the processor started (was the limit lowered since?). The transaction is "
            "aborted and nothing of the batch is visible; the processor stops. Fix: raise the "
            "topic's max.message.bytes back and restart the processor (it reads the limits "
            "again), or run with processing_guarantee: at-least-once."
        )
    if errors:
        raise TransactionAbortableError(
            f"records of the batch could not be written ({errors[0]}); the transaction is "
            "aborted and the batch processed again"
        )
