"""The control log against the real broker: kept forever, read to its end, never replaced by
a fresh one behind the app's back, and scale/expand requests that exclude each other."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from framework.app import App
from framework.config import ConfigError
from framework.coordination.control_log import ControlLog, ControlWatcher
from framework.coordination.layout import prepare_app
from framework.coordination.registry import TopicRegistry
from framework.coordination.scaling import read_control, request_scale
from framework.errors import SplitstateError
from framework.growth.expand import ExpandError, expand_topic
from framework.kafka import Clients, Kafka, KafkaConsumer
from framework.loader import load_app
from framework.runtime.loop import ProcessorRuntime
from rebalance.control import AppDefinition, Generation
from statestore import DatabaseIdentity, ProcessorDatabase, StoreLockedError, processor_path
from statestore.lock import DirectoryLock
from tests.conftest import TopicFactory
from tests.integration.harness import unique, write_config

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"


def new_app(tmp_path: Path, kafka: str, topics: TopicFactory, partitions: int = 8) -> App:
    """The wordcount app on fresh topics (nothing recorded yet)."""
    words, counts = unique("words"), unique("counts")
    topics(partitions, name=words)
    topics(partitions, name=counts)
    admin = AdminClient({"bootstrap.servers": kafka})
    deadline = time.monotonic() + 30
    while not {words, counts} <= set(admin.list_topics(timeout=10).topics):
        assert time.monotonic() < deadline, "the topics did not appear"
        time.sleep(0.1)
    directory = tmp_path / unique("app")
    directory.mkdir()
    config = write_config(
        directory,
        kafka,
        app_id=unique("ctl"),
        inputs=[{"topic": words, "partitions": partitions, "producer_lease_ms": 2000,
                 "producer_delivery_timeout_ms": 2000}],
        outputs=[{"topic": counts, "partitions": partitions}],
        initial_processors=2,
    )  # fmt: skip
    return load_app(APP, config)


def control_records(app: App) -> list[dict[str, object]]:
    records = Clients.of(app.config).read_log(app.config.control_topic)
    return [orjson.loads(r.value) for r in records if r.value]


def recreate_empty(admin: AdminClient, kafka: Kafka, topic: str) -> None:
    """Delete ``topic`` and create it again, empty (as an operator's mistake would)."""
    admin.delete_topics([topic])[topic].result(timeout=30)
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} was not deleted"
        time.sleep(0.2)
    ControlLog(kafka, topic).ensure_topic()


def test_the_control_log_is_created_to_keep_every_record(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    app = new_app(tmp_path, kafka_bootstrap, topic_factory)
    prepare_app(app, Clients.of(app.config))
    resource = ConfigResource(ResourceType.TOPIC, app.config.control_topic)
    configs = kafka_admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "-1"
    assert configs["retention.bytes"].value == "-1"


def test_a_control_log_that_would_delete_records_is_refused(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    app = new_app(tmp_path, kafka_bootstrap, topic_factory)
    topic = app.config.control_topic
    deleting = {"cleanup.policy": "delete,compact", "retention.ms": "60000"}
    topic_factory(1, name=topic, config=deleting)
    with pytest.raises(SplitstateError) as refused:
        prepare_app(app, Clients.of(app.config))
    message = str(refused.value)
    assert f"{topic!r}" in message
    assert "retention.ms=60000" in message
    assert f"--entity-name {topic} --add-config retention.ms=-1" in message
    assert control_records(app) == []  # nothing was written to it


def test_catch_up_refuses_a_partial_read(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    app = new_app(tmp_path, kafka_bootstrap, topic_factory)
    prepare_app(app, Clients.of(app.config))
    watcher = ControlWatcher(Clients.of(app.config), app.config.control_topic)
    try:
        end = watcher.end_offset()
        assert end == 2
        with pytest.raises(SplitstateError) as refused:
            watcher.catch_up(end + 3, timeout=1.5)
        message = str(refused.value)
        assert app.config.control_topic in message
        assert "read to offset 2 of 5" in message
        assert "Fix: make Kafka reachable" in message
        watcher.catch_up(end, timeout=10)  # the real end is reached
        assert watcher.state.processors == 2
    finally:
        watcher.close()


def test_an_empty_control_log_is_refused_when_the_group_has_offsets(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    app = new_app(tmp_path, kafka_bootstrap, topic_factory)
    config = app.config
    words = config.inputs[0].topic
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": config.app_id})
    try:
        consumer.commit(offsets=[TopicPartition(words, 3, 17)], asynchronous=False)
    finally:
        consumer.close()
    with pytest.raises(SplitstateError) as refused:
        prepare_app(app, Clients.of(app.config))
    message = str(refused.value)
    assert config.control_topic in message
    assert f"consumer group {config.app_id!r} has committed offsets ({words}[3]@17)" in message
    assert "restore" in message and "new app_id" in message
    assert control_records(app) == []  # no fresh app definition was written


def test_a_processor_refuses_an_empty_control_log_its_state_outlived(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    app = new_app(tmp_path, kafka_bootstrap, topic_factory)
    config = app.config
    words = config.inputs[0].topic
    path = processor_path(config.app_state_dir, 0)
    fixed = {"initial_processors": 2, "inputs": {words: 8}, "key_hash": "murmur3"}
    identity = DatabaseIdentity(config.app_id, 0, fixed)
    with ProcessorDatabase.open(path, identity, app.store_specs()) as database:
        batch = database.begin()
        batch.set_offset(words, 0, 42)
        batch.commit()
    with pytest.raises(SplitstateError) as refused:
        ProcessorRuntime(app, 0).run(until=lambda _stats: True)
    message = str(refused.value)
    assert config.control_topic in message
    assert f"processor 0's state in {path.resolve()} holds input offsets ({words}[0]@42)" in message
    assert control_records(app) == []


def test_a_processor_refuses_a_control_log_behind_its_state(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    app = new_app(tmp_path, kafka_bootstrap, topic_factory)
    config = app.config
    ProcessorRuntime(app, 0).run(until=lambda _stats: True)
    assert request_scale(app, 3).generation == 1
    ProcessorRuntime(app, 0).run(until=lambda _stats: True)  # it sees generation 1 in progress
    # The control log is lost and rewritten as it was before the scale.
    recreate_empty(kafka_admin, Clients.of(config), config.control_topic)
    definition = AppDefinition(config.app_id, 2, {config.inputs[0].topic: 8})
    ControlLog(Clients.of(config), config.control_topic).append(
        definition.to_record(), Generation(0, 2).to_record()
    )
    with pytest.raises(SplitstateError) as refused:
        ProcessorRuntime(app, 0).run(until=lambda _stats: True)
    message = str(refused.value)
    assert config.control_topic in message
    assert "processor 0 has seen generation 1" in message
    assert "the log reaches generation 0" in message


def test_two_racing_scale_requests_never_both_succeed(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    for _round in range(4):
        app = new_app(tmp_path, kafka_bootstrap, topic_factory)
        prepare_app(app, Clients.of(app.config))
        barrier = threading.Barrier(2)
        outcomes: dict[int, str] = {}

        def ask(
            processors: int,
            app: App = app,
            barrier: threading.Barrier = barrier,
            outcomes: dict[int, str] = outcomes,
        ) -> None:
            barrier.wait()
            try:
                scale = request_scale(app, processors)
                outcomes[processors] = f"ok {scale.new_processors}"
            except ConfigError as error:
                outcomes[processors] = f"refused: {error}"

        threads = [threading.Thread(target=ask, args=(p,)) for p in (3, 4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        accepted = [p for p, text in outcomes.items() if text.startswith("ok")]
        assert len(outcomes) == 2
        assert len(accepted) == 1, outcomes
        state = read_control(app)
        assert state.scaling is not None
        assert state.scaling.new_processors == accepted[0]
        loser = next(text for text in outcomes.values() if text.startswith("refused"))
        assert "in progress" in loser


def test_a_growth_in_the_control_log_excludes_a_scale_and_the_other_way_round(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    app = new_app(tmp_path, kafka_bootstrap, topic_factory, partitions=4)
    config = app.config
    kafka = Clients.of(config)
    words = config.inputs[0].topic
    control = ControlLog(kafka, config.control_topic)
    prepare_app(app, Clients.of(app.config))

    # a growth record in the control log alone (the registry knows nothing yet) stops a scale
    control.append({"type": "growth", "topic": words, "partitions": 8, "request": "other"})
    with pytest.raises(ConfigError, match=f"is growing input topic {words!r} to 8 partitions"):
        request_scale(app, 3)
    assert read_control(app).scaling is None
    control.append({"type": "growth_done", "topic": words, "partitions": 8, "request": "other"})

    # expand takes the control log first; a scale asked meanwhile is refused
    entry = expand_topic(kafka, words, 6, control=control, report=lambda _l: None,
                         stop_after="recorded")  # fmt: skip
    assert entry.growth is not None
    assert read_control(app).growth is not None
    with pytest.raises(ConfigError, match=f"is growing input topic {words!r} to 6 partitions"):
        request_scale(app, 3)
    # a rerun resumes the growth it started, then lets scales through again
    entry = expand_topic(kafka, words, 6, control=control, report=lambda _l: None)
    assert entry.growth is None and entry.partitions == 6
    assert read_control(app).growth is None
    assert request_scale(app, 3).generation == 1

    # while that scale runs, expand is refused through the same log
    with pytest.raises(ExpandError, match="is scaling to 3 processors"):
        expand_topic(kafka, words, 8, control=control, report=lambda _l: None)
    assert TopicRegistry(kafka).read()[words].partitions == 6
    records = control_records(app)
    assert [r["type"] for r in records].count("growth") == 2  # the rerun adopted its own


def test_an_initial_partition_count_that_differs_from_the_control_log_is_refused(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, topic_factory: TopicFactory
) -> None:
    app = new_app(tmp_path, kafka_bootstrap, topic_factory)
    config = app.config
    words = config.inputs[0].topic
    control = ControlLog(Clients.of(config), config.control_topic)
    control.ensure_topic()
    # the app first ran when the topic had 4 partitions; the registry now says N = 8
    definition = AppDefinition(config.app_id, 2, {words: 4})
    control.append(definition.to_record(), Generation(0, 2).to_record())
    with pytest.raises(ConfigError) as refused:
        prepare_app(app, Clients.of(app.config))
    message = str(refused.value)
    assert f"input topic {words!r}" in message
    assert "initial partition count 8 in the topic registry" in message
    assert "4 in the control log" in message
    assert "Fix:" in message


class CountingClients(Clients):
    """``Clients`` that count the consumers made and closed (a run must close all it opens)."""

    def __init__(self, settings: dict[str, str]) -> None:
        super().__init__(settings)
        self.opened = 0
        self.closed = 0

    def consumer(self, group_id: str, **options: Any) -> KafkaConsumer:
        made = super().consumer(group_id, **options)
        self.opened += 1
        close = made.close

        def counted() -> None:
            self.closed += 1
            close()

        made.close = counted  # type: ignore[method-assign]
        return made


def test_a_run_that_cannot_open_its_state_closes_the_clients_it_opened(
    tmp_path: Path, kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    app = new_app(tmp_path, kafka_bootstrap, topic_factory)
    ProcessorRuntime(app, 0).run(until=lambda _stats: True)  # records the app
    path = processor_path(app.config.app_state_dir, 0)
    kafka = CountingClients({"bootstrap.servers": kafka_bootstrap})
    holder = DirectoryLock(path)  # as if another process held the state directory
    try:
        with pytest.raises(StoreLockedError):
            ProcessorRuntime(app, 0, kafka).run(until=lambda _stats: True)
    finally:
        holder.release()
    assert kafka.opened >= 1
    assert kafka.closed == kafka.opened
