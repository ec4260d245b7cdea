"""Adversarial review of issue 34 on the real broker: each test pins one defect found in
review and fails on the code it was written against.

- two `splitstate expand`s of the same shrink racing: the second adopts the first's hold of
  the control log, measures the survivors' ends after the first recorded the count, and
  overwrites the registry: the merged keys' first records placed with the new count fall
  below the recorded hold and are judged late;
- `expand` measures end offsets read_committed (the last stable offset): under a transaction
  left open, a partition grown again starts below a late record, and a shrink right after a
  growth measures a hold below the growth's marker and crashes;
- compaction tombstones of a producer still on the count before a shrink land in the key's
  home after the shrink, after a newer value there: the log cleaner deletes the live value.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
from confluent_kafka import KafkaError, Message, Producer

from framework.coordination.control_log import ControlLog
from framework.coordination.layout import prepare_app
from framework.coordination.registry import REGISTRY_TOPIC, TopicEntry, TopicRegistry
from framework.growth.compaction import COMPACTION_HEADER
from framework.growth.compaction_writes import CompactionTombstones
from framework.growth.expand import expand_topic
from framework.growth.hold import acquire_growth
from framework.growth.placement import COUNT_HEADER, LinearHashPartitioner, produce_placed
from framework.kafka import Clients, DeliveryError, Kafka, KafkaConsumer
from framework.kafka import Message as PortMessage
from framework.producer import SplitstateProducer
from rebalance import Shrink, bucket, key_hash
from tests.integration.compacted_reads import FAST_COMPACTION, read_topic
from tests.integration.harness import unique
from tests.integration.test_compacted_history import fast_cleaner
from tests.integration.test_shrink_command import Topic

pytestmark = pytest.mark.integration

__all__ = ["fast_cleaner"]  # (a fixture used here)


def _quiet(_line: str) -> None:
    pass


def _no_wait(_seconds: float) -> None:
    pass  # no producer of the old count runs but the test's own


def _keys(initial: int, count: int, partition: int, how_many: int) -> list[bytes]:
    """Keys that ``count`` partitions (grown from ``initial``) place on ``partition``."""
    found = []
    for i in range(100_000):
        key = f"k-{i}".encode()
        if bucket(key_hash(key), initial, count) == partition:
            found.append(key)
            if len(found) == how_many:
                return found
    raise AssertionError("not enough keys")


class _Racing:
    """The Kafka port of a second `expand` started while the first one runs: ``first`` runs
    (the first `expand` going on) just before the second measures end offsets."""

    def __init__(self, kafka: Kafka, first: Callable[[], None]) -> None:
        self._kafka = kafka
        self._first: Callable[[], None] | None = first

    def consumer(self, group_id: str, **settings: Any) -> KafkaConsumer:
        if group_id == "splitstate-expand" and self._first is not None:
            first, self._first = self._first, None
            first()
        return self._kafka.consumer(group_id, **settings)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kafka, name)


def test_two_racing_shrinks_keep_the_holds_the_producers_switched_by(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """8 -> 5 run twice at once (an operator's second terminal, a retried job): the second
    adopts the first's control-log hold. The first records the count with the survivors'
    ends; producers switch and place the keys of 5 in 1; then the second, which read the
    registry before the first wrote it, measures 1's end again and writes its own step. The
    registry must still place the merged keys' new records in 1 (``home_at``), not call them
    late."""
    topic = Topic(tmp_path, kafka_bootstrap)
    prepare_app(topic.app(), topic.kafka)
    control = ControlLog(topic.kafka, topic.app().config.control_topic)
    topic.produce()
    expand_topic(topic.kafka, topic.name, 8, control=control, report=_quiet, wait=_no_wait)
    topic.produce()
    merged = _keys(4, 8, 5, 20)

    def first() -> None:
        expand_topic(topic.kafka, topic.name, 5, control=control, report=_quiet,
                     wait=_no_wait, stop_after="recorded")  # fmt: skip
        pending = merged
        for _round in range(5):  # placed with 5 (the registry's count now): in 1
            failed: list[bytes] = []  # (the topic's delivery timeout is 1 s: send them again)

            def note(
                error: DeliveryError | None, message: PortMessage, failed: list[bytes] = failed
            ) -> None:
                if error is not None:
                    failed.append(message.key() or b"")

            producer = SplitstateProducer({"bootstrap.servers": kafka_bootstrap}, [topic.name])
            for key in pending:
                producer.produce(topic.name, key, b'{"producer": "p", "seq": 2}', on_delivery=note)
            assert producer.close(60) == 0
            if not failed:
                return
            pending = failed
        raise AssertionError(f"{len(pending)} records could not be delivered")

    racing = cast(Kafka, _Racing(topic.kafka, first))
    expand_topic(racing, topic.name, 5, control=control, report=_quiet, wait=_no_wait,
                 stop_after="recorded")  # fmt: skip
    history = topic.entry().history
    shrink = history.steps[-1]
    assert isinstance(shrink, Shrink)
    placed = [(o, k) for o, k, h in topic.records(1) if h.get(COUNT_HEADER) == b"5"]
    assert len(placed) == len(merged)
    late = [(o, k) for o, k in placed if history.home_at(key_hash(k or b""), 1, o) != 1]
    assert late == [], f"hold {shrink.holds[1]} recorded above new-count records {late}"


def _open_transaction(
    bootstrap: str, topic: str, partition: int, key: bytes, count: int
) -> tuple[Producer, int]:
    """A transaction left open holding one record of ``key`` in ``topic[partition]``, placed
    with ``count`` partitions; the producer and the record's offset."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tx")})
    producer.init_transactions(30)
    producer.begin_transaction()
    delivered: list[Message] = []
    errors: list[KafkaError] = []

    def done(error: KafkaError | None, message: Message) -> None:
        if error is None:
            delivered.append(message)
        else:
            errors.append(error)

    producer.produce(topic, b"v", key, partition, headers=[(COUNT_HEADER, str(count).encode())],
                     on_delivery=done)  # fmt: skip
    producer.flush(30)
    assert not errors and delivered
    offset = delivered[0].offset()
    assert offset is not None
    return producer, offset


def _registered(bootstrap: str, topic: str) -> Clients:
    kafka = Clients({"bootstrap.servers": bootstrap})
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.register(topic, 4, lease_ms=1000, delivery_timeout_ms=1000)
    return kafka


def test_a_partition_grown_again_starts_above_a_late_record_in_an_open_transaction(
    kafka_bootstrap: str, topic_factory: Any
) -> None:
    """4 -> 8 -> 5, then a record placed with 8 before the shrink lands in deleted 5 after
    its drain marker (its producer paused past its lease), in a transaction still open.
    Growing to 8 again measures 5's start: the record is before the new life (late, judged
    by the shrink), not in it, where it would be processed after the key's records in 1."""
    name = topic_factory(4)
    kafka = _registered(kafka_bootstrap, name)
    try:
        expand_topic(kafka, name, 8, report=_quiet, wait=_no_wait)
        expand_topic(kafka, name, 5, report=_quiet, wait=_no_wait)
        (key,) = _keys(4, 8, 5, 1)
        producer, offset = _open_transaction(kafka_bootstrap, name, 5, key, 8)
        try:
            entry = expand_topic(kafka, name, 8, report=_quiet, wait=_no_wait,
                                 stop_after="recorded")  # fmt: skip
        finally:
            producer.abort_transaction(30)
        history = entry.history
        assert history.home_at(key_hash(key), 5, offset) != 5, (
            f"the late record at 5@{offset} is in 5's new life (start {history.steps[-1]})"
        )
    finally:
        kafka.close()


def test_a_shrink_right_after_a_growth_measures_holds_above_the_growths_marker(
    kafka_bootstrap: str, topic_factory: Any
) -> None:
    """A transaction writing to 1 was open before the growth 4 -> 8 wrote its marker there
    (a processor's exactly-once output batch) and is still open when 8 -> 5 measures 1's
    hold: the last stable offset is below the marker, the hold recorded below it makes no
    history, and `expand` crashes with a ValueError instead of shrinking (or refusing with
    a fix)."""
    name = topic_factory(4)
    kafka = _registered(kafka_bootstrap, name)
    try:
        (key,) = _keys(4, 4, 1, 1)
        producer, _offset = _open_transaction(kafka_bootstrap, name, 1, key, 4)
        try:
            expand_topic(kafka, name, 8, report=_quiet, wait=_no_wait)
            entry = expand_topic(kafka, name, 5, report=_quiet, wait=_no_wait,
                                 stop_after="recorded")  # fmt: skip
        finally:
            producer.abort_transaction(30)
        shrink = entry.history.steps[-1]
        assert isinstance(shrink, Shrink)
        assert entry.history.step_at(1, shrink.holds[1]) == 2
    finally:
        kafka.close()


def _records_of(
    bootstrap: str, topic: str, key: bytes
) -> list[tuple[int, int, bytes | None, bool]]:
    """``(partition, offset, value, compaction tombstone)`` of every record of ``key``."""
    return [
        (r.partition, r.offset, r.value, COMPACTION_HEADER in r.headers)
        for r in read_topic(bootstrap, topic, 8)
        if r.key == key
    ]


def _last_entry_before(kafka: Clients, topic: str, counts: tuple[int, ...]) -> TopicEntry:
    """``topic``'s registry entry as written last before the one recording ``counts``."""
    entries = [
        TopicEntry.from_record(orjson.loads(record.value))
        for record in kafka.read_log(REGISTRY_TOPIC)
        if record.key is not None
        and record.key.split(b"/", 1)[0] == topic.encode()
        and record.value is not None
    ]
    first = next(i for i, e in enumerate(entries) if e.history.counts == counts)
    return entries[first - 1]


def test_an_old_count_compaction_tombstone_never_deletes_the_value_in_the_keys_home(
    kafka_bootstrap: str, topic_factory: Any, fast_cleaner: None
) -> None:
    """A compacted input 4 -> 8 -> 5; key k lives in 5 at 8 partitions, in 1 at 5. During the
    shrink's fence window, producer NEW (count 5) writes k = new to 1 (and a compaction
    tombstone to 5); then producer OLD, still within its lease on count 8, writes k = old to
    5 and, its first write of k, a compaction tombstone to 1. In produced (lineage) order
    old (5, before the drain marker) comes before new (1, from the hold): the processors
    hold new. After the log cleaner ran, a rebuild from the log must still find new, but the
    old producer's tombstone landed in k's home after new, and the cleaner deleted it.

    (Fixed by announcing the change a fence before its count is recorded: a producer within
    its lease once the count is recorded saw the announcement, and writes no tombstone while
    a change is in progress. OLD's view is so the entry written last before the count.)"""
    name = topic_factory(4, config=FAST_COMPACTION)
    kafka = _registered(kafka_bootstrap, name)
    try:
        assert TopicRegistry(kafka).read()[name].compacted
        expand_topic(kafka, name, 8, report=_quiet, wait=_no_wait)
        new = expand_topic(kafka, name, 5, report=_quiet, wait=_no_wait, stop_after="recorded")
        # OLD, within its lease on count 8 after the count 5 was recorded, holds the last
        # entry written before the count ("wait=_no_wait" skips the fences, so the test
        # takes the view a producer that honours its lease would have at the time)
        old = _last_entry_before(kafka, name, new.history.counts)
        (key,) = _keys(4, 8, 5, 1)
        (probe,) = _keys(4, 5, 1, 1)

        def write(entry: TopicEntry, value: bytes) -> None:
            producer = kafka.producer()
            partitioner = LinearHashPartitioner({name: entry})
            produce_placed(producer, lambda: partitioner, name, key, value,
                           tombstones=CompactionTombstones())  # fmt: skip
            assert producer.flush(30) == 0
            producer.close()

        write(new, b"new")
        write(old, b"old")
        entry = expand_topic(kafka, name, 5, report=_quiet, wait=_no_wait)  # the drain markers
        history = entry.history
        written = _records_of(kafka_bootstrap, name, key)
        values = [(p, o, v) for p, o, v, tomb in written if not tomb]
        latest = max(values, key=lambda r: (history.rank(r[0], r[1]), r[1]))
        assert latest[2] == b"new"  # what the processors hold

        # let the cleaner run: two values of a probe key in 1, then a record in 1 and 5 each
        # after segment.ms, so their segments roll
        plain = Producer({"bootstrap.servers": kafka_bootstrap})
        for value in (b"p1", b"p2"):
            plain.produce(name, value, probe, 1)
        plain.flush(30)
        time.sleep(1)
        for partition in (1, 5):
            plain.produce(name, b"filler", f"filler-{partition}".encode(), partition)
        plain.flush(30)
        deadline = time.monotonic() + 90
        while len(_records_of(kafka_bootstrap, name, probe)) > 1:
            assert time.monotonic() < deadline, "the log cleaner did not run"
            time.sleep(1)
        time.sleep(3)  # (past delete.retention.ms: tombstones cleaned too)
        kept = [(p, o, v) for p, o, v, tomb in _records_of(kafka_bootstrap, name, key) if v]
        assert kept, "every value of the key is gone"
        rebuilt = max(kept, key=lambda r: (history.rank(r[0], r[1]), r[1]))
        assert rebuilt[2] == b"new", f"after compaction a rebuild reads {rebuilt} ({written})"
    finally:
        kafka.close()


def test_expand_from_the_config_does_not_carry_out_a_change_the_registry_never_recorded(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """`expand --partitions 5` held the control log and stopped before it recorded anything
    in the registry (the topic still has 8 partitions). The operator sets the config back to
    8 and runs `splitstate expand`: the config asks for no change, so the topic must keep 8
    partitions (the hold released, or a refusal naming the fix), not be shrunk to 5."""
    topic = Topic(tmp_path, kafka_bootstrap)
    prepare_app(topic.app(), topic.kafka)
    control = ControlLog(topic.kafka, topic.app().config.control_topic)
    expand_topic(topic.kafka, topic.name, 8, control=control, report=_quiet, wait=_no_wait)
    assert acquire_growth(control, topic.name, 5, True, _quiet, noun="shrink")[0] is not None
    topic.configure(8)
    code, out, err = topic.expand()
    assert topic.entry().history.counts == (4, 8), (code, out, err)
    assert code != 0 and "holds a change of" in err and "to 5 partitions" in err, (out, err)
    assert f"--topic {topic.name} --partitions 5" in err  # the fix
    topic.configure(5)  # carried out as it names
    code, out, err = topic.expand()
    assert code == 0, err
    assert topic.entry().history.counts == (4, 8, 5)
