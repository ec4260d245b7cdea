"""``kafka.settings`` checked by librdkafka itself before any client of the app starts.

The settings are handed to a client that is made without bootstrap servers (so it never
connects) and destroyed at once: librdkafka refuses unknown properties and bad values there,
as it would when the app's first client starts, but with the error naming the config field.
Secret values are masked in the message. Each distinct set of settings is checked once per
process.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

from confluent_kafka import KafkaException, Producer

from framework.config import ConfigError
from framework.redaction import MASK, is_secret_key

__all__ = ["check_kafka_settings"]

_quiet = logging.getLogger("splitstate.kafka.settings-check")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def check_kafka_settings(settings: Mapping[str, object]) -> None:
    """Raise ``ConfigError`` naming the problem when librdkafka refuses ``settings`` (an
    unknown property, a bad value); ``bootstrap.servers`` is left out of the trial."""
    trial = tuple(sorted((k, str(v)) for k, v in settings.items() if k != "bootstrap.servers"))
    if trial:
        _check(trial)


@functools.lru_cache(maxsize=32)
def _check(trial: tuple[tuple[str, str], ...]) -> None:
    try:
        client = Producer({**dict(trial), "logger": _quiet})
    except KafkaException as error:
        reason = error.args[0].str() if error.args else str(error)
        for key, value in trial:
            if is_secret_key(key) and value:
                reason = reason.replace(value, MASK)
        raise ConfigError(
            f"kafka.settings: librdkafka refuses them: {reason}. Fix: check the property "
            "against librdkafka's CONFIGURATION.md (names are dotted, e.g. security.protocol)"
        ) from None
    client.flush(0)
    del client
