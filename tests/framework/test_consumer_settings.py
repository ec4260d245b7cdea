"""The settings of the consumers splitstate makes (``Clients.consumer``).

They read ``read_committed``, which asks the group for *stable* offsets: right after a
transaction that committed offsets the broker answers UNSTABLE_OFFSET_COMMIT until the
transaction's markers are written, and librdkafka asks again after ``retry.backoff.ms``. At
librdkafka's 100 ms an old owner's release waited about 100 ms for its own group offsets
after its last transaction (issue 32, item 7); the consumers ask again after 10 ms. A user's
``kafka.settings`` still decide."""

from __future__ import annotations

from typing import Any
from unittest import mock

from framework.kafka.clients import Clients


def _settings(user: dict[str, Any]) -> dict[str, Any]:
    with (
        mock.patch("framework.kafka.clients.ConfluentConsumer") as made,
        mock.patch("framework.kafka.clients.check_reachable"),  # no broker here
    ):
        Clients({"bootstrap.servers": "127.0.0.1:1", **user}).consumer("app", name="main")
    [(settings, name), _kwargs] = made.call_args
    assert name == "main"
    return dict(settings)


def test_consumers_read_committed_and_ask_again_for_unstable_offsets_soon() -> None:
    settings = _settings({})
    assert settings["isolation.level"] == "read_committed"
    assert settings["retry.backoff.ms"] == 10
    assert settings["group.id"] == "app" and settings["enable.auto.commit"] is False


def test_the_users_kafka_settings_decide() -> None:
    settings = _settings({"retry.backoff.ms": 250, "isolation.level": "read_uncommitted"})
    assert settings["retry.backoff.ms"] == 250
    assert settings["isolation.level"] == "read_uncommitted"
