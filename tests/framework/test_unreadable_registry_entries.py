"""Topic-registry records that cannot be read (``__splitstate_topics`` is shared by every app
and producer on the cluster): another app's unreadable entry, or a key that names no topic,
is ignored by every app and producer; this app's own unreadable entry stops its processors,
``status`` and its producers (whose lease then names the record, not Kafka's reach), and is
never registered afresh over the topic's history.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.coordination.registry import REGISTRY_TOPIC, TopicRegistry
from framework.errors import SplitstateError
from framework.growth.lease import ProducerLeaseError
from framework.ops.status import collect_status
from framework.producer import SplitstateProducer
from tests.clocks import ManualClock
from tests.framework.test_unreadable_control_records import append, run
from tests.sim.app import INPUT
from tests.sim.one_key import one_key_world

#: registry records no app's topic has: another app's unreadable entries, keys of no topic
OTHER_APPS = {
    "not JSON": (b"some-other-apps-topic", b"not json"),
    "no fields": (b"some-other-apps-topic", b"{}"),
    "a list": (b"some-other-apps-topic", b"[]"),
    "an empty history": (b"some-other-apps-topic", b'{"topic": "x", "counts": []}'),
    "another topic's entry": (b"some-other-apps-topic", b'{"topic": "x", "counts": [1]}'),
    "a string for a count": (b"some-other-apps-topic", b'{"topic": "y", "counts": ["1"]}'),
    "a key that is not UTF-8": (b"\xff\xfe", b'{"topic": "x", "counts": [1]}'),
    "a key that names no topic": (b"no topic/name", b"{}"),
}
#: values of this app's own input's entry that cannot be read
OWN_ENTRY = {
    "not JSON": b"not json",
    "no counts": b'{"topic": "sim-in"}',
    "counts that shrink": b'{"topic": "sim-in", "counts": [4, 2]}',
    "another topic's entry": b'{"topic": "sim-out", "counts": [2]}',
    "a negative lease": b'{"topic": "sim-in", "counts": [2], "lease_ms": -1}',
}


@pytest.mark.parametrize(("key", "value"), list(OTHER_APPS.values()), ids=list(OTHER_APPS))
def test_another_apps_unreadable_registry_entry_is_ignored_by_every_reader(
    tmp_path: Path, key: bytes, value: bytes
) -> None:
    kafka, app = one_key_world(tmp_path, records=3, seed=1, exactly_once=False)
    producer = SplitstateProducer(kafka, [INPUT])
    append(kafka, REGISTRY_TOPIC, key, value)
    entries = TopicRegistry(kafka).read()
    assert entries[INPUT].partitions == 2
    assert entries.get("x") is None
    assert producer.lease.renew()  # producers of this app's topics renew their leases
    assert run(kafka, app) == 3
    assert collect_status(app, kafka=kafka).generation == 0
    assert SplitstateProducer(kafka, [INPUT]).lease.fresh()


@pytest.mark.parametrize("value", list(OWN_ENTRY.values()), ids=list(OWN_ENTRY))
def test_an_unreadable_entry_of_the_apps_own_topic_stops_its_readers(
    tmp_path: Path, value: bytes
) -> None:
    kafka, app = one_key_world(tmp_path, records=3, seed=1, exactly_once=False)
    producer = SplitstateProducer(kafka, [INPUT])
    (previous,) = (  # its input's entry, under its own key (and again under `sim-in`)
        r.offset
        for r in kafka.read_log(REGISTRY_TOPIC)
        if r.key is not None and r.key.startswith(f"{INPUT}/".encode())
    )
    offset = append(kafka, REGISTRY_TOPIC, INPUT.encode(), value)
    refusal = (
        rf"'{REGISTRY_TOPIC}' holds an entry for topic '{INPUT}' that cannot be read, at "
        rf"offset {offset}: .* a tombstone of its key '{INPUT}': every reader then goes on from "
        rf"its entry before it \(the record at offset {previous}\)"
    )
    with pytest.raises(SplitstateError, match=refusal):
        TopicRegistry(kafka).read()[INPUT]
    with pytest.raises(SplitstateError, match=refusal):
        run(kafka, app)
    with pytest.raises(SplitstateError, match=refusal):
        collect_status(app, kafka=kafka)
    with pytest.raises(SplitstateError, match=refusal):
        SplitstateProducer(kafka, [INPUT])
    # a running producer's lease runs out, naming the record, not Kafka's reach
    assert not producer.lease.renew()
    assert isinstance(kafka.clock, ManualClock)
    kafka.clock.now += producer.lease.lease_seconds + 1
    with pytest.raises(ProducerLeaseError, match=refusal):
        producer.lease.check()
    # nothing registered the topic afresh over its history
    assert kafka.read_log(REGISTRY_TOPIC)[-1].offset == offset
    append(kafka, REGISTRY_TOPIC, INPUT.encode(), None)  # the fix it names
    assert TopicRegistry(kafka).read()[INPUT].partitions == 2


def test_a_later_readable_entry_replaces_an_unreadable_one(tmp_path: Path) -> None:
    kafka, app = one_key_world(tmp_path, records=3, seed=1, exactly_once=False)
    registry = TopicRegistry(kafka)
    good = kafka.read_log(REGISTRY_TOPIC)[0]
    assert good.key is not None and good.key.startswith(f"{INPUT}/".encode())  # one per record
    assert good.value is not None
    append(kafka, REGISTRY_TOPIC, INPUT.encode(), b"{}")
    append(kafka, REGISTRY_TOPIC, INPUT.encode(), good.value)  # the fix the error names
    assert registry.read()[INPUT].partitions == 2
    assert run(kafka, app) == 3
