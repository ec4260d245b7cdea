"""Sending a batch's outputs and dead letters without waiting for Kafka (pipelined batches).

``send`` hands every output and dead letter of a batch to the producer and returns at once;
the returned ``Sending`` counts the deliveries still unacknowledged and keeps the failures,
so the pipeline commits the batch once ``done`` and nothing failed. Records refused for size
before they reach the broker are handled here as the waiting writer handles them: an output
too large for its topic (measured under exactly-once, or refused by the producer) becomes a
dead letter of its input record, a dead letter too large its stand-in without the value. A
refusal by the broker shows up as a failure of the batch (see ``framework.runtime.pipeline``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from framework.kafka import DeliveryError, Message, RecordTooLargeError
from framework.processing import DeadLetter, EncodedOutput, InputMessage
from framework.runtime.delivery import BatchWriter
from framework.runtime.size_letters import output_dead_letter, stripped_dead_letter

__all__ = ["Sending", "send"]

log = logging.getLogger(__name__)

Source = Callable[[tuple[str, int, int] | None], InputMessage | None]


class Sending:
    """The deliveries of one batch sent without waiting (the delivery callback of each)."""

    __slots__ = ("failures", "pending", "replaced")

    def __init__(self) -> None:
        #: records handed to the producer and not acknowledged yet
        self.pending = 0
        self.failures: list[DeliveryError] = []
        #: outputs replaced by dead letters for their size
        self.replaced = 0

    def __call__(self, error: DeliveryError | None, _message: Message) -> None:
        self.pending -= 1
        if error is not None:
            self.failures.append(error)

    @property
    def done(self) -> bool:
        """Whether Kafka answered for every record."""
        return self.pending <= 0

    @property
    def too_large(self) -> bool:
        """Whether the broker refused a record for its size."""
        return any(error.too_large for error in self.failures)


def send(
    writer: BatchWriter, outputs: list[EncodedOutput], dead: list[DeadLetter], source: Source
) -> Sending:
    """Hand ``outputs`` and ``dead`` to ``writer``'s producer without waiting (``source``:
    the input record at an output's origin, for the dead letter of an output too large)."""
    sending = Sending()
    letters = list(dead)
    refused = writer.send_outputs(outputs, sending)
    # counted after: a report served while waiting for queue room has counted itself down
    sending.pending += len(outputs) - len(refused)
    for output, reason in refused:
        sending.replaced += 1
        letters.append(output_dead_letter(output, reason, source(output.origin)))
        log.warning(
            "an output of %s[%d]@%d to %s is too large for Kafka (%s); the record goes to the "
            "dead-letter topic %s",
            *(output.origin or ("?", -1, -1)),
            output.topic,
            reason,
            writer.dead_letter_topic,
        )
    topic = writer.dead_letter_topic
    for letter in letters:
        why = writer.too_big(topic, letter.key, letter.value, letter.kafka_headers())
        if why is not None:
            letter = stripped_dead_letter(letter, topic, why)  # noqa: PLW2901 - its stand-in
        sending.pending += 1
        try:
            writer.produce_letter(letter, sending)
        except RecordTooLargeError as error:
            writer.produce_letter(stripped_dead_letter(letter, topic, error.reason), sending)
    return sending
