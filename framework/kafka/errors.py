"""The port's errors: what goes wrong talking to Kafka, in splitstate's own classes."""

from __future__ import annotations

from framework.errors import SplitstateError

__all__ = [
    "ConsumerFailedError",
    "KafkaIOError",
    "KafkaUnreachableError",
    "OffsetResetError",
    "ProducerFencedError",
    "RecordTooLargeError",
    "RetentionError",
    "TransactionAbortableError",
    "UnknownPartitionError",
]


class KafkaIOError(SplitstateError):
    """Kafka could not be reached or refused a request."""


class ConsumerFailedError(KafkaIOError):
    """The consumer failed for good (a fatal error: it cannot be used any more); a new one
    may work once the cause is fixed."""


class KafkaUnreachableError(KafkaIOError):
    """No broker answered at the bootstrap servers (the message says what each server
    answered, for how long, and the fix)."""


class UnknownPartitionError(KafkaIOError):
    """The topic or partition asked about does not exist (yet)."""


class RecordTooLargeError(KafkaIOError):
    """The producer refused a record as larger than it or the broker accepts.

    ``reason``: Kafka's short description of the refusal.
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class OffsetResetError(KafkaIOError):
    """A consumer that may not skip records met a position Kafka no longer holds (retention
    deleted records under it). ``reason``: Kafka's description."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class RetentionError(SplitstateError):
    """A coordination topic's config would let Kafka delete records."""


class ProducerFencedError(KafkaIOError):
    """Another producer with the same transactional id started since this one: it may write
    nothing more (another instance of the same processor runs)."""


class TransactionAbortableError(KafkaIOError):
    """The open transaction cannot commit (it timed out, or Kafka refused a record in it):
    abort it; nothing of it becomes visible, and its batch can be processed again."""
