"""TEMPORARY: what ``framework/runtime`` still hands the coordination and growth code.

Until the runtime builds its clients from the port (issue 13), it passes client settings,
its own ``AdminClient`` and its own confluent-kafka ``Producer`` where the port is expected
now. These turn them into the port. Remove this module with the runtime's conversion.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Producer as LegacyProducer
from confluent_kafka.admin import AdminClient as LegacyAdmin

from framework.kafka.clients import Clients
from framework.kafka.confluent_producer import ConfluentProducer
from framework.kafka.port import Kafka, KafkaProducer

__all__ = ["LegacyAdmin", "LegacyProducer", "port", "producer"]

_shared: dict[str, Clients] = {}
_lock = threading.Lock()


def port(
    kafka: Kafka | Mapping[str, Any] | LegacyAdmin, settings: Mapping[str, Any] | None = None
) -> Kafka:
    """``kafka`` when it is a port; else the process's ``Clients`` of the client settings
    ``kafka`` is (or of ``settings``, for an ``AdminClient``): one per cluster, so that their
    appends share one producer."""
    if isinstance(kafka, Mapping):
        settings = kafka
    elif not isinstance(kafka, LegacyAdmin):
        return kafka
    assert settings is not None, "an AdminClient comes with its client settings"
    key = repr(sorted(settings.items()))
    with _lock:
        clients = _shared.get(key)
        if clients is None:
            clients = _shared[key] = Clients(settings)
        return clients


def producer(producer: KafkaProducer | LegacyProducer) -> KafkaProducer:
    """``producer`` as the port's producer."""
    if isinstance(producer, LegacyProducer):
        return ConfluentProducer(producer)
    return producer
