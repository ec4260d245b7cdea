"""Shared fixtures: one real Kafka broker per test run, topic/producer/consumer factories, and
one local Spark session per test process.

Set KAFKA_BOOTSTRAP_SERVERS to use a broker that already runs instead of starting one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import settings

from framework.ops.broker import LocalBroker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Property tests check behaviour, not speed: on a loaded 2-core CI machine (tests running in
# parallel, brokers and Spark beside them) one example may take longer than hypothesis's
# default 200 ms deadline, which would fail a correct test.
settings.register_profile("splitstate", deadline=None)
settings.load_profile("splitstate")

TopicFactory = Callable[..., str]
ProducerFactory = Callable[..., Producer]
ConsumerFactory = Callable[..., Consumer]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--seed N``: the simulation schedule ``pytest tests/sim -k replay`` runs."""
    parser.addoption(
        "--seed", type=int, default=None, help="replay this simulation seed (tests/sim)"
    )


@pytest.fixture(autouse=True)
def _example_apps_kept() -> Iterator[None]:
    """Each test finds the example apps as their modules made them. A test that loads one by
    name with its own config (``load_app``, as the CLI does) configures the module's shared
    ``App`` object; without this, a later test in the same process saw that config (seen in
    CI, depending on which tests xdist gave one worker)."""
    from examples.balances.app import app as balances  # noqa: PLC0415
    from examples.wordcount.app import app as wordcount  # noqa: PLC0415

    apps = (balances, wordcount)
    saved = [(app._config, app.config_file, app.spec) for app in apps]
    yield
    for app, (config, config_file, spec) in zip(apps, saved, strict=True):
        app._config, app.config_file, app.spec = config, config_file, spec


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``bootstrap.servers`` of a real broker: KAFKA_BOOTSTRAP_SERVERS, or one started here."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
        return
    broker = LocalBroker(tmp_path_factory.mktemp("kafka-broker"))
    info = broker.start()
    try:
        yield info.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local Spark session without the Kafka connector, shared by every test of this process
    that builds state with Spark (``build_state(..., spark=spark)``): the session each test
    app's ``bootstrap_session(app, kafka=False)`` would start (every test app keeps the default
    ``spark.master`` and no ``spark.settings``), started once instead of once per module (a
    JVM's start and warm-up take seconds). Stopped when the process's tests end."""
    from framework.bootstrap.spark_session import spark_session  # noqa: PLC0415 - pyspark late
    from framework.config_sections import SparkConfig  # noqa: PLC0415
    from framework.jvm import find_java  # noqa: PLC0415

    defaults = SparkConfig()
    java_home = find_java().executable.resolve().parent.parent
    session = spark_session(
        "splitstate-tests", defaults.master, defaults.settings, java_home=java_home
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap: str) -> AdminClient:
    """An admin client of the test broker."""
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def topic_factory(kafka_admin: AdminClient) -> Iterator[TopicFactory]:
    """Create unique topics: ``topic_factory(partitions=6, config={...})``; deleted after."""
    created: list[str] = []

    def create(
        partitions: int = 1, name: str | None = None, config: dict[str, str] | None = None
    ) -> str:
        topic = name or f"test-{uuid.uuid4().hex[:10]}"
        futures = kafka_admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})]
        )
        futures[topic].result(timeout=30)
        created.append(topic)
        return topic

    yield create
    if created:
        for future in kafka_admin.delete_topics(created).values():
            future.result(timeout=30)


@pytest.fixture
def producer_factory(kafka_bootstrap: str) -> Iterator[ProducerFactory]:
    """Make producers: ``producer_factory({"linger.ms": 5})``; each is flushed after the test."""
    producers: list[Producer] = []

    def make(config: dict[str, Any] | None = None) -> Producer:
        producer = Producer({"bootstrap.servers": kafka_bootstrap, **(config or {})})
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        producer.flush(30)


@pytest.fixture
def consumer_factory(kafka_bootstrap: str) -> Iterator[ConsumerFactory]:
    """Make consumers (a unique group unless ``group_id`` is given); closed after the test."""
    consumers: list[Consumer] = []

    def make(group_id: str | None = None, config: dict[str, Any] | None = None) -> Consumer:
        settings = {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": group_id or f"test-group-{uuid.uuid4().hex[:10]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **(config or {}),
        }
        consumer = Consumer(settings)
        consumers.append(consumer)
        return consumer

    yield make
    for consumer in consumers:
        consumer.close()
