"""`splitstate expand` to fewer partitions on the real broker (issue 34): the refusals (below
the initial count, below the processor count, during a scale, another change in progress; a
scale during a shrink), each writing nothing; a shrink, a growth that re-uses the deleted
partitions and another shrink, with their markers at the offsets the registry records and
Kafka keeping every partition; and markers on a compacted input, which Kafka refuses without
a key. (Processors reading through a shrink under load: the acceptance test.)"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from framework.app import App
from framework.coordination.control_log import ControlLog
from framework.coordination.layout import prepare_app
from framework.coordination.registry import REGISTRY_TOPIC, TopicEntry, TopicRegistry
from framework.coordination.scaling import abort_scale, request_scale
from framework.growth.expand import expand_topic
from framework.growth.markers import MARKER_HEADER
from framework.growth.placement import COUNT_HEADER
from framework.kafka import Clients, DeliveryError, Message, watermarks
from framework.loader import load_app
from framework.producer import SplitstateProducer
from rebalance import Grow, Shrink, bucket, key_hash
from tests.integration.harness import consume_ready, splitstate, unique, write_config

pytestmark = pytest.mark.integration

APP = "tests.integration.apps.sequences:app"
LEASE = {"producer_lease_ms": 1000, "producer_delivery_timeout_ms": 1000}

Record = tuple[int, bytes | None, dict[str, bytes]]  # offset, key, headers


class Topic:
    """An app's input topic on the broker, driven through the CLI as a user would."""

    def __init__(self, tmp_path: Path, bootstrap: str, processors: int = 2) -> None:
        self.bootstrap = bootstrap
        self.name = unique("events")
        self.config = write_config(
            tmp_path,
            bootstrap,
            app_id=unique("shrink"),
            inputs=[{"topic": self.name, "partitions": 4, **LEASE}],
            outputs=[{"topic": unique("out"), "partitions": 4}],
            initial_processors=2,
            processors=processors,
        )
        created = splitstate("topics", "create", APP, "--config", str(self.config))
        assert created.returncode == 0, created.stderr
        self.kafka = Clients({"bootstrap.servers": bootstrap})

    def app(self) -> App:
        return load_app(APP, self.config)

    def expand(self, partitions: int | None = None) -> tuple[int, str, str]:
        """`splitstate expand` of this topic to ``partitions`` (``None``: to the config's)."""
        target = (
            () if partitions is None else ("--topic", self.name, "--partitions", str(partitions))
        )
        done = splitstate("expand", APP, "--config", str(self.config), *target, timeout=180)
        return done.returncode, done.stdout, done.stderr

    def configure(self, partitions: int) -> None:
        """Set the input's ``partitions`` in the config file."""
        data = yaml.safe_load(self.config.read_text())
        data["inputs"][0]["partitions"] = partitions
        self.config.write_text(yaml.safe_dump(data))

    def entry(self) -> TopicEntry:
        return TopicRegistry(self.kafka).read()[self.name]

    def written(self) -> tuple[int, int]:
        """How many records the registry and the app's control log hold."""
        control = self.app().config.control_topic
        return len(self.kafka.read_log(REGISTRY_TOPIC)), len(self.kafka.read_log(control))

    def produce(self, keys: int = 200) -> None:
        """One record of each key; one whose delivery failed (the registry's delivery timeout
        here is 1 s, short under load) is sent again, placed with the count then."""
        pending = [f"key-{i}".encode() for i in range(keys)]
        for _round in range(5):
            failed: list[bytes] = []

            def note(
                error: DeliveryError | None, message: Message, failed: list[bytes] = failed
            ) -> None:
                if error is not None:
                    failed.append(message.key() or b"")

            producer = SplitstateProducer({"bootstrap.servers": self.bootstrap}, [self.name])
            for key in pending:
                producer.produce(self.name, key, b'{"producer": "p", "seq": 1}', on_delivery=note)
            assert producer.close(60) == 0
            if not failed:
                return
            print(f"{len(failed)} deliveries failed; sending them again")
            pending = failed
        raise AssertionError(f"{len(pending)} records could not be delivered")

    def records(self, partition: int) -> list[Record]:
        """Every record of ``partition`` (markers too), in offset order."""
        return records_of(self.bootstrap, self.name, partition)

    def markers(self, partition: int) -> list[tuple[int, bytes]]:
        """``(offset, id)`` of each marker in ``partition``."""
        return [(o, h[MARKER_HEADER]) for o, _k, h in self.records(partition) if MARKER_HEADER in h]

    def ends(self) -> dict[int, int]:
        """Each partition's end offset now."""
        count = self.kafka.partition_counts([self.name])[self.name]
        found = watermarks(self.kafka, [(self.name, p) for p in range(count)])
        return {p: offsets.end for (_t, p), offsets in found.items()}


def records_of(bootstrap: str, topic: str, partition: int) -> list[Record]:
    """Every record of ``topic[partition]`` (markers too), in offset order: read until the
    consumer's position reaches the partition's end as Kafka reports it first."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("read"), "enable.auto.commit": False}
    )
    where = TopicPartition(topic, partition)
    _low, high = consumer.get_watermark_offsets(where, timeout=30)
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    found: list[Record] = []
    deadline = time.monotonic() + 30
    while high > 0 and consumer.position([where])[0].offset < high:
        assert time.monotonic() < deadline, f"could not read {topic}[{partition}] to {high}"
        for message in consume_ready(consumer, 1000, 0.5):
            offset = message.offset()
            if message.error() is None and offset is not None:
                headers: dict[str, bytes] = {}
                for header in message.headers() or []:
                    if isinstance(header[1], bytes):
                        headers[str(header[0])] = header[1]
                found.append((offset, message.key(), headers))
    consumer.close()
    return found


def refused(topic: Topic, partitions: int, *expected: str) -> str:
    """`expand` to ``partitions`` is refused with ``expected`` texts and writes nothing."""
    before = topic.written()
    code, _out, err = topic.expand(partitions)
    assert code == 2, err
    for text in (*expected, "Fix:"):
        assert text in err, err
    assert topic.written() == before
    return err


def test_shrink_refusals_write_nothing(tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = Topic(tmp_path, kafka_bootstrap)
    prepare_app(topic.app(), topic.kafka)  # the app's definition: 2 processors
    code, out, err = topic.expand(8)
    assert code == 0, err
    refused(topic, 3, "never goes below the initial count", "ask for 4 partitions or more")

    # during a scale: refused; once it is aborted, the shrink goes ahead
    scale = request_scale(topic.app(), 3, kafka=topic.kafka)
    refused(topic, 5, "is scaling to 3 processors", "wait until the scale completes")
    abort_scale(topic.app(), "test", kafka=topic.kafka)

    # a scale during a shrink (stopped after recording its count): refused, nothing written
    control = ControlLog(topic.kafka, topic.app().config.control_topic)
    expand_topic(topic.kafka, topic.name, 5, control=control, report=lambda _l: None,
                 stop_after="recorded")  # fmt: skip
    before = topic.written()
    scaled = splitstate("scale", APP, "--config", str(topic.config), "--processors", "3")
    assert scaled.returncode == 2
    assert f"`splitstate expand` is shrinking input topic {topic.name!r} to 5" in scaled.stderr
    assert (
        "Fix: wait until the expand command finishes (run it again with --topic "
        f"{topic.name} --partitions 5"
    ) in scaled.stderr
    assert topic.written() == before
    # another change meanwhile: refused
    refused(topic, 6, f"a shrink of {topic.name!r} to 5 partitions is in progress",
            "finish it first")  # fmt: skip
    status = splitstate("status", APP, "--config", str(topic.config))
    assert status.returncode == 0, status.stderr
    assert f"input {topic.name}: partitions 4 -> 8 -> 5" in status.stdout
    assert "shrinking to 5: drain markers pending for [5, 6, 7]" in status.stdout
    # (offset 0 of 1 is the marker of the growth to 8)
    assert f"{topic.name}[1] holds keys of {topic.name}[5] from offset 1 until" in status.stdout

    code, out, err = topic.expand(5)  # the same command resumes it
    assert code == 0, err
    assert f"resuming the shrink of {topic.name} to 5 partitions" in out
    assert f"{topic.name}: partitions 4 -> 8 -> 5" in out
    assert topic.entry().growth is None
    assert scale.generation == 1


def test_a_shrink_below_the_processor_count_is_refused(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    topic = Topic(tmp_path, kafka_bootstrap, processors=6)
    code, _out, err = topic.expand(8)  # before the app first starts: 6 processors need 8
    assert code == 0, err
    prepare_app(topic.app(), topic.kafka)
    refused(topic, 5, "the app runs 6 processors, more than the 5 partitions",
            "scale in first")  # fmt: skip
    topic.configure(5)  # the config's count: the same refusal
    before = topic.written()
    code, _out, err = topic.expand()
    assert code == 2 and "scale in first" in err and topic.written() == before
    code, out, err = topic.expand(6)
    assert code == 0, err
    assert f"{topic.name}: partitions 4 -> 8 -> 6" in out


def test_shrink_regrow_shrink_markers_sit_where_the_registry_says(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    topic = Topic(tmp_path, kafka_bootstrap)
    prepare_app(topic.app(), topic.kafka)
    topic.produce()
    assert topic.expand(8)[0] == 0
    topic.produce()
    ends = topic.ends()

    code, out, err = topic.expand(5)  # 8 -> 5
    assert code == 0, err
    entry = topic.entry()
    shrink = entry.history.steps[-1]
    assert isinstance(shrink, Shrink)
    assert dict(shrink.holds) == {t: ends[t] for t in (1, 2, 3)}
    holds = " ".join(f"{t}@{ends[t]}" for t in (1, 2, 3))
    assert f"shrink {topic.name} 8 -> 5: recorded (holds: {holds}); producers switch" in out
    for d in (5, 6, 7):
        assert topic.markers(d) == [(ends[d], f"{topic.name}/2/5/{d}/drain".encode())]
        assert shrink.drains[d] == ends[d]
        assert f"drain marker for partition {d} at {topic.name}[{d}]@{ends[d]}" in out
    assert (
        f"{topic.name} now has 5 partitions (4 -> 8 -> 5); drain markers recorded; deleted: 5, 6, 7"
    ) in out
    assert re.search(r"waiting \d+\.\d+s: producers' lease \(1000 ms\)", out)

    time.sleep(1.5)  # past the producers' lease: new records are placed with 5
    topic.produce()
    for d in (5, 6, 7):  # nothing lands in a deleted partition
        assert topic.records(d)[-1][0] == ends[d]
    moved = [r for r in topic.records(1) if r[0] >= shrink.holds[1]]
    assert moved and all(h[COUNT_HEADER] == b"5" for _o, _k, h in moved)
    assert any(bucket(key_hash(k or b""), 4, 8) == 5 for _o, k, _h in moved)  # 5's keys merged

    # 5 -> 7 through the config: 5 and 6 re-used from their ends, their markers in 1 and 2
    topic.configure(7)
    code, out, err = topic.expand()
    assert code == 0, err
    assert "created partitions" not in out
    assert f"{topic.name}: partitions 4 -> 8 -> 5 -> 7" in out
    assert topic.kafka.partition_counts([topic.name]) == {topic.name: 8}
    first, _shrink, grow = topic.entry().history.steps
    assert isinstance(first, Grow) and isinstance(grow, Grow)
    assert dict(grow.starts) == {5: ends[5] + 1, 6: ends[6] + 1}  # after the drain markers
    for child, up in ((5, 1), (6, 2)):
        assert topic.markers(up) == [
            (first.markers[child], f"{topic.name}/1/8/{child}".encode()),
            (grow.markers[child], f"{topic.name}/3/7/{child}".encode()),
        ]
    time.sleep(1.5)
    topic.produce()
    second = [r for r in topic.records(5) if r[0] > ends[5]]
    assert second and all(h[COUNT_HEADER] == b"7" for _o, _k, h in second)  # its offsets go on
    assert second[0][0] == ends[5] + 1

    # 7 -> 4 through the config again: 4, 5 and 6 deleted, 5 for the second time
    topic.configure(4)
    code, out, err = topic.expand()
    assert code == 0, err
    assert f"{topic.name}: partitions 4 -> 8 -> 5 -> 7 -> 4" in out
    last = topic.entry().history.steps[-1]
    assert isinstance(last, Shrink) and sorted(last.holds) == [0, 1, 2]
    assert [i for _o, i in topic.markers(5)] == [
        f"{topic.name}/2/5/5/drain".encode(),
        f"{topic.name}/4/4/5/drain".encode(),
    ]
    assert topic.markers(5)[-1][0] == last.drains[5] == topic.records(5)[-1][0]
    assert topic.kafka.partition_counts([topic.name]) == {topic.name: 8}

    status = splitstate("status", APP, "--config", str(topic.config))
    assert status.returncode == 0, status.stderr
    assert f"input {topic.name}: partitions 4 -> 8 -> 5 -> 7 -> 4" in status.stdout
    assert "  deleted: 4 (draining: no committed offset, drain marker at" in status.stdout
    shown = splitstate("topics", "create", APP, "--config", str(topic.config))
    assert shown.returncode == 0, shown.stderr
    assert re.search(
        rf"{topic.name} +exists  partitions 4 -> 8 -> 5 -> 7 -> 4 \(deleted 4\.\.7\)",
        shown.stdout,
    ), shown.stdout


def test_markers_on_a_compacted_input_have_a_key(tmp_path: Path, kafka_bootstrap: str) -> None:
    name = unique("table")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(name, 4, 1, config={"cleanup.policy": "compact"})])[name].result(
        30
    )
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.register(name, 4, lease_ms=1000, delivery_timeout_ms=1000)
    # why: Kafka refuses a record without a key on a compacted topic
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    errors: list[KafkaError | None] = []
    producer.produce(name, b"{}", None, 0, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD

    entry = expand_topic(kafka, name, 8, report=lambda _l: None)
    assert entry.compacted
    entry = expand_topic(kafka, name, 5, report=lambda _l: None)
    assert entry.history.counts == (4, 8, 5)
    for d in (5, 6, 7):
        ((_offset, key, headers),) = records_of(kafka_bootstrap, name, d)
        assert key == headers[MARKER_HEADER] == f"{name}/2/5/{d}/drain".encode()
    for child, up in ((4, 0), (5, 1)):
        ((_offset, key, headers),) = records_of(kafka_bootstrap, name, up)
        assert key == headers[MARKER_HEADER] == f"{name}/1/8/{child}".encode()
