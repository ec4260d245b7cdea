"""The Kafka port: every Kafka client splitstate uses comes from one ``Kafka`` object.

``Kafka`` (the interface, ``port``) makes consumers and producers, does topic admin (create,
grow, describe, configs) and reads and appends the compacted logs splitstate coordinates
through. ``Clients`` implements it with confluent-kafka for one cluster's client settings;
nothing outside this package imports confluent-kafka. ``check_retention``, ``watermarks``
and ``consume_ready`` work through any port.
"""

from framework.kafka.clients import Clients
from framework.kafka.errors import (
    ConsumerFailedError,
    KafkaIOError,
    OffsetResetError,
    ProducerFencedError,
    RecordTooLargeError,
    RetentionError,
    TransactionAbortableError,
    UnknownPartitionError,
)
from framework.kafka.port import (
    DeliveryCallback,
    DeliveryError,
    Header,
    Isolation,
    Kafka,
    KafkaConsumer,
    KafkaProducer,
    LogRecord,
    Message,
    OffsetReset,
    TopicDescription,
    TopicSpec,
    TransactionalProducer,
)
from framework.kafka.ready import consume_ready
from framework.kafka.topics import COMPACTED, check_retention, compacts, watermarks

__all__ = [
    "COMPACTED",
    "Clients",
    "ConsumerFailedError",
    "DeliveryCallback",
    "DeliveryError",
    "Header",
    "Isolation",
    "Kafka",
    "KafkaConsumer",
    "KafkaIOError",
    "KafkaProducer",
    "LogRecord",
    "Message",
    "OffsetReset",
    "OffsetResetError",
    "ProducerFencedError",
    "RecordTooLargeError",
    "RetentionError",
    "TopicDescription",
    "TopicSpec",
    "TransactionAbortableError",
    "TransactionalProducer",
    "UnknownPartitionError",
    "check_retention",
    "compacts",
    "consume_ready",
    "watermarks",
]
