"""The Kafka port: every Kafka client splitstate uses, and what it does with them.

Topic admin (create, grow, describe, check retention), watermarks, and the compacted logs
splitstate coordinates through (read to their end, appended synchronously).
"""

from framework.kafka.io import (
    COMPACTED,
    KafkaIOError,
    RetentionError,
    TopicSpec,
    append,
    check_retention,
    ensure_topics,
    partition_counts,
    read_log,
    watermarks,
)

__all__ = [
    "COMPACTED",
    "KafkaIOError",
    "RetentionError",
    "TopicSpec",
    "append",
    "check_retention",
    "ensure_topics",
    "partition_counts",
    "read_log",
    "watermarks",
]
