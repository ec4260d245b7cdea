"""A local Apache Kafka broker for development, tests and the demo (no Docker needed)."""

from framework.jvm import (
    JvmSetupError,
    cache_dir,
    find_java,
    kafka_classpath,
    resolve_jars,
    spark_kafka_jars,
)
from framework.ops.broker.local import BrokerError, BrokerInfo, LocalBroker, free_port

__all__ = [
    "BrokerError",
    "BrokerInfo",
    "JvmSetupError",
    "LocalBroker",
    "cache_dir",
    "find_java",
    "free_port",
    "kafka_classpath",
    "resolve_jars",
    "spark_kafka_jars",
]
