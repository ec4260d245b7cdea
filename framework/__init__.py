"""splitstate: stateful stream processing on Kafka that scales without moving state.

Everything a user writes against is here: ``App`` and its ``AppConfig``, the ``Record`` a
processor function receives and the ``Output`` it returns, ``KeyState`` (one key's state),
``KeyTable`` (one key's value of a table: ``framework.tables``), ``TestDriver`` for unit
tests without Kafka, time (windows, aggregations, timers, values that expire:
``framework.time``), and ``SplitstateProducer`` for writing input
topics with the app's key placement. The subsystems live in sub-packages: ``kafka`` (the
port to Kafka), ``coordination`` (control log, topic registry), ``growth`` (the partition
growth fence), ``runtime`` (the processor loop and its parts in a scale), ``bootstrap``
(Spark bulk builds) and ``ops`` (CLI, status, supervisor, local broker).
"""

from framework.app import App
from framework.config import AppConfig, BatchConfig, ConfigError, KafkaConfig, TopicConfig
from framework.errors import SplitstateError
from framework.growth.lease import ProducerLeaseError
from framework.kafka import DeliveryError, KafkaIOError, RecordTooLargeError
from framework.producer import SplitstateProducer
from framework.records import Output, Record
from framework.tables import KeyTable
from framework.testing import TestDriver
from framework.time import (
    Collect,
    Count,
    ExpiringState,
    Hopping,
    KeyTimers,
    KeyWindows,
    LateError,
    Max,
    Mean,
    Min,
    Reduce,
    Session,
    Sliding,
    Sum,
    Timer,
    Tumbling,
    WindowResult,
)
from statestore import KeyState

__all__ = [
    "App",
    "AppConfig",
    "BatchConfig",
    "Collect",
    "ConfigError",
    "Count",
    "DeliveryError",
    "ExpiringState",
    "Hopping",
    "KafkaConfig",
    "KafkaIOError",
    "KeyState",
    "KeyTable",
    "KeyTimers",
    "KeyWindows",
    "LateError",
    "Max",
    "Mean",
    "Min",
    "Output",
    "ProducerLeaseError",
    "Record",
    "RecordTooLargeError",
    "Reduce",
    "Session",
    "Sliding",
    "SplitstateError",
    "SplitstateProducer",
    "Sum",
    "TestDriver",
    "Timer",
    "TopicConfig",
    "Tumbling",
    "WindowResult",
]
