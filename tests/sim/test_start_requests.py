"""What a start asks Kafka for: how often it reads and appends the coordination logs.

Each read of the topic registry or the control log, and each append, is a round trip (once
a new consumer or producer each), and a start waits for all of them: a first start registers
its new topics in one append, reads the control log before and after writing the app's
definition, and a later start reads each log once. ``ControlWatcher.catch_up`` asks for no
more records than it misses, so that a consume returns once they are there instead of waiting
for a fuller batch. Counted here, not timed."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from framework.coordination.control_log import ControlLog, ControlWatcher
from framework.coordination.layout import prepare_app
from framework.coordination.registry import REGISTRY_TOPIC
from framework.kafka import KafkaConsumer, LogRecord, Message, TopicSpec
from tests.clocks import ManualClock
from tests.sim.app import INPUT, OUTPUT, make_app
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka


class CountingKafka(MemoryKafka):
    """A port that counts each topic's log reads and appends."""

    def __init__(self) -> None:
        super().__init__(Broker(random.Random(1)), ManualClock())
        self.reads: Counter[str] = Counter()
        self.appends: Counter[str] = Counter()

    def read_log(self, topic: str, partition: int = 0) -> list[LogRecord]:
        self.reads[topic] += 1
        return super().read_log(topic, partition)

    def append(self, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        self.appends[topic] += 1
        return super().append(topic, records)


def test_a_first_start_registers_its_topics_in_one_append_and_a_restart_only_reads(
    tmp_path: Path,
) -> None:
    kafka = CountingKafka()
    kafka.create_topics([TopicSpec(INPUT, 2), TopicSpec(OUTPUT, 2)])
    app = make_app(
        tmp_path, partitions=2, initial_processors=2, max_records=5, lease_ms=2000, ready_lag=0
    )
    control = app.config.control_topic
    layout = prepare_app(app, kafka, 0)
    assert set(layout.inputs) == {INPUT} and set(layout.outputs) == {OUTPUT}
    assert kafka.appends == {REGISTRY_TOPIC: 1, control: 1}  # both topics, one append
    # read again before each append, and the registry once after (the first registration of
    # a topic is the one kept)
    assert kafka.reads == {REGISTRY_TOPIC: 3, control: 2}

    kafka.reads.clear()
    kafka.appends.clear()
    again = prepare_app(app, kafka, 0)
    assert again.control == layout.control
    assert kafka.appends == {}
    assert kafka.reads == {REGISTRY_TOPIC: 1, control: 1}


class _AskedConsumer:
    """Notes how many records each consume asks for."""

    def __init__(self, consumer: KafkaConsumer, asked: list[int]) -> None:
        self._consumer = consumer
        self._asked = asked

    def consume(self, max_records: int, timeout: float) -> list[Message]:
        self._asked.append(max_records)
        return self._consumer.consume(max_records, timeout)

    def __getattr__(self, name: str) -> object:
        return getattr(self._consumer, name)


def test_catch_up_asks_for_the_records_it_misses(tmp_path: Path) -> None:
    kafka = CountingKafka()
    log = ControlLog(kafka, "control")
    log.ensure_topic()
    log.append(*({"type": "metadata_hash", "hash": n} for n in range(3)))
    watcher = ControlWatcher(kafka, "control")
    asked: list[int] = []
    watcher._consumer = _AskedConsumer(watcher._consumer, asked)  # type: ignore[assignment]
    watcher.catch_up(watcher.end_offset())
    assert watcher.position() == 3 and asked == [3]
    watcher.catch_up(3)  # read to that end already: nothing asked
    assert asked == [3]
    log.append({"type": "metadata_hash", "hash": 3})
    watcher.catch_up(watcher.end_offset())
    assert asked == [3, 1] and watcher.state.metadata_hash == 3
    watcher.close()
