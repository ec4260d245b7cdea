"""``splitstate order base``: a growth child's base published from its parent's history
(``framework.ops.growth_base_history``), on the in-memory Kafka."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from framework import App, AppConfig, KafkaConfig, Record
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.coordination.control_log import ControlLog
from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.growth.markers import MARKER_HEADER, MarkerName
from framework.kafka import TopicSpec
from framework.ops.cli.order import order_base
from framework.ops.growth_base_history import GrowthBaseError
from framework.runtime.growth_bases import growth_base_record
from rebalance import TopicHistory
from tests.clocks import ManualClock
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka


def _app() -> App:
    config = AppConfig(
        app_id="two",
        kafka=KafkaConfig(bootstrap_servers="simulated:9092"),
        inputs=[TopicConfig(topic="clicks", partitions=2), TopicConfig(topic="views")],
        initial_processors=1,
        time=TimeConfig(input_order="canonical", max_input_wait=timedelta(seconds=1)),
    )
    app = App(config)
    app.store("s")

    @app.processor(stores=["s"])
    def f(record: Record[bytes], state: object) -> None:
        """Nothing."""

    return app


def _kafka(app: App) -> MemoryKafka:
    """clicks[0]: a click at 500, clicks[1]'s growth marker (offset 1), a click at 900;
    clicks grew to 2 (the marker recorded), under ``arrival``: no base published."""
    clock = ManualClock()
    kafka = MemoryKafka(Broker(random.Random(0)), clock)
    kafka.create_topics(
        [TopicSpec("clicks", 2), TopicSpec("views", 1), TopicSpec(app.config.control_topic, 1)]
    )
    producer = kafka.producer()
    marker = MarkerName(2, 1, 1).marker_id("clicks").encode()
    for at, key, headers in [(0.5, b"a", None), (0.6, None, [(MARKER_HEADER, marker)])]:
        clock.now = at
        producer.produce("clicks", b"", key, 0, headers=headers)
        producer.flush(10)
    clock.now = 0.9
    producer.produce("clicks", b"", b"b", 0)
    producer.flush(10)
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    registry.write(TopicEntry(TopicHistory.of("clicks", [1, 2], {1: 1})))
    registry.write(TopicEntry(TopicHistory.of("views", [1])))
    return kafka


def test_the_base_is_computed_from_the_parents_history_and_published_once() -> None:
    app = _app()
    kafka = _kafka(app)
    assert order_base(app, kafka, "clicks", 1) == (0, 500, True)  # (a marker has no time)
    control = ControlLog(kafka, app.config.control_topic)
    assert control.read().growth_bases == {("clicks", 1, 0): 500}
    assert order_base(app, kafka, "clicks", 1, 7) == (0, 500, False)  # (the first stays)


def test_a_base_given_is_published() -> None:
    app = _app()
    kafka = _kafka(app)
    assert order_base(app, kafka, "clicks", 1, 450) == (0, 450, True)


def test_a_parent_whose_history_is_gone_is_refused_naming_the_fix() -> None:
    app = _app()
    kafka = _kafka(app)
    kafka.broker.delete_before("clicks", 0, 1)
    with pytest.raises(GrowthBaseError, match=r"retention deleted.*--base N"):
        order_base(app, kafka, "clicks", 1)
    assert ControlLog(kafka, app.config.control_topic).read().growth_bases == {}


def test_a_partition_that_is_not_a_growth_child_is_refused() -> None:
    app = _app()
    kafka = _kafka(app)
    with pytest.raises(GrowthBaseError, match="not a growth child"):
        order_base(app, kafka, "clicks", 0)


def _grown_twice(app: App) -> MemoryKafka:
    """As ``_kafka``, then clicks grew to 4: clicks[3]'s parent is clicks[1] (a child of
    clicks[0], base 500), its marker at offset 1 of clicks[1], after a click at 400."""
    kafka = _kafka(app)
    kafka.create_partitions("clicks", 4)
    clock = kafka.clock
    assert isinstance(clock, ManualClock)
    producer = kafka.producer()
    marker = MarkerName(4, 3, 2).marker_id("clicks").encode()
    for at, key, headers in [(0.4, b"c", None), (0.95, None, [(MARKER_HEADER, marker)])]:
        clock.now = at
        producer.produce("clicks", b"", key, 1, headers=headers)
        producer.flush(10)
    history = TopicHistory.of("clicks", [1, 2, 4], {1: 1, 2: 2, 3: 1})
    TopicRegistry(kafka).write(TopicEntry(history))
    return kafka


def test_a_child_of_a_child_takes_its_parents_base_computed_or_recorded() -> None:
    """clicks[3]'s base is clicks[1]'s mark at its marker: at least clicks[1]'s own base
    (computed from clicks[0]'s history, 500: above the click at 400), or the one recorded."""
    app = _app()
    kafka = _grown_twice(app)
    assert order_base(app, kafka, "clicks", 3) == (0, 500, True)
    app, kafka = _app(), _grown_twice(_app())
    ControlLog(kafka, app.config.control_topic).append(growth_base_record("clicks", 1, 0, 800))
    assert order_base(app, kafka, "clicks", 3) == (0, 800, True)
