"""``consume_ready``: a consumer's records as soon as any is there, through any port."""

from __future__ import annotations

from typing import Any, cast

from framework.kafka import KafkaConsumer, consume_ready


class _Batching:
    """A consumer with only ``consume`` (as the in-memory one): it is what is called."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, float]] = []

    def consume(self, max_records: int, timeout: float) -> list[Any]:
        self.calls.append(("consume", max_records, timeout))
        return ["batched"]


class _Ready(_Batching):
    """A consumer with its own ``consume_ready`` (as confluent-kafka's): it is preferred."""

    def consume_ready(self, max_records: int, timeout: float) -> list[Any]:
        self.calls.append(("consume_ready", max_records, timeout))
        return ["ready"]


def test_a_consumer_with_its_own_consume_ready_is_asked_for_what_is_there() -> None:
    consumer = _Ready()
    got: list[object] = list(consume_ready(cast(KafkaConsumer, consumer), 1000, 0.5))
    assert got == ["ready"]
    assert consumer.calls == [("consume_ready", 1000, 0.5)]


def test_a_consumer_without_it_consumes_as_before() -> None:
    consumer = _Batching()
    got: list[object] = list(consume_ready(cast(KafkaConsumer, consumer), 1000, 0.5))
    assert got == ["batched"]
    assert consumer.calls == [("consume", 1000, 0.5)]
