"""Dead letters of records Kafka refuses as too large: an output's (it becomes a dead letter of
the input record that produced it) and a dead letter's own (a small stand-in replaces it)."""

from __future__ import annotations

import logging
from dataclasses import replace

from framework.processing import DeadLetter, EncodedOutput, InputMessage

__all__ = ["MAX_DEAD_LETTER_VALUE", "output_dead_letter", "stripped_dead_letter"]

log = logging.getLogger("framework.runtime.delivery")

#: Dead letters of outputs carry at most this much of the input record's value.
MAX_DEAD_LETTER_VALUE = 64 * 1024
_SMALL_KEY = 1024


def output_dead_letter(output: EncodedOutput, why: str, message: InputMessage | None) -> DeadLetter:
    """The dead letter of the input record whose ``output`` Kafka refused as too large."""
    topic, partition, offset = output.origin or (output.topic, -1, -1)
    size = len(output.key) + len(output.value or b"")
    value = None if message is None else message.value()
    cut = ""
    if value is not None and len(value) > MAX_DEAD_LETTER_VALUE:
        cut = f"; the value here is the first {MAX_DEAD_LETTER_VALUE} of its {len(value)} bytes"
        value = value[:MAX_DEAD_LETTER_VALUE]
    reason = (
        f"its output to topic {output.topic!r} ({size} bytes) is larger than Kafka accepts "
        f"(the producer's message.max.bytes or the topic's max.message.bytes): {why}. The "
        f"record's state change was kept and this output dropped{cut}. Fix: make the output "
        "smaller, or raise the topic's max.message.bytes (and kafka.settings message.max.bytes)"
    )
    if message is None:
        return DeadLetter(topic, partition, offset, output.key, value, (), "output", reason)
    letter = DeadLetter.of(message, (topic, partition, offset), "output", reason)
    return replace(letter, value=value)


def stripped_dead_letter(letter: DeadLetter, topic: str, why: str) -> DeadLetter:
    """A small stand-in for ``letter``, which Kafka refused as too large for ``topic``."""
    log.warning(
        "the dead letter of %s[%d]@%d is too large for topic %s (%s); a stand-in without "
        "the record's value and headers goes there instead",
        letter.topic,
        letter.partition,
        letter.offset,
        topic,
        why,
    )
    small_key = letter.key is None or len(letter.key) <= _SMALL_KEY
    dropped = "value and headers" if small_key else "key, value and headers"
    note = (
        f" [this dead letter was too large for topic {topic!r} ({why}), so the record's "
        f"{dropped} were dropped; read it at {letter.topic}[{letter.partition}]@{letter.offset}]"
    )
    return replace(
        letter,
        key=letter.key if small_key else None,
        value=None,
        headers=(),
        reason=letter.reason[:2000] + note,
    )
