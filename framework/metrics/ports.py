"""Which port each processor's endpoint uses when one machine runs several (``run --all``).

Processor ``j`` listens on ``metrics.port + j`` (port 0 stays 0: any free port each). The
local supervisor passes each child its port as ``SPLITSTATE_METRICS__PORT``, which wins over
the config file; a processor run alone (``--processor-id J``, e.g. one per pod) listens on
``metrics.port`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from framework.config import ConfigError, MetricsConfig

__all__ = ["PORT_VARIABLE", "child_environment", "processor_port"]

#: the environment variable that sets a processor's metrics port
PORT_VARIABLE = "SPLITSTATE_METRICS__PORT"
_HIGHEST_PORT = 65535


def processor_port(settings: MetricsConfig, processor: int) -> int | None:
    """Processor ``processor``'s port on a machine running every processor (``None``: off)."""
    if settings.port is None:
        return None
    if settings.port == 0:
        return 0
    port = settings.port + processor
    if port > _HIGHEST_PORT:
        raise ConfigError(
            f"metrics.port {settings.port} + processor {processor} = {port} is past the "
            f"highest port ({_HIGHEST_PORT}): under `splitstate run --all` processor j "
            f"listens on metrics.port + j. Fix: set metrics.port to at most "
            f"{_HIGHEST_PORT - processor}."
        )
    return port


def child_environment(
    settings: MetricsConfig, processor: int, environment: Mapping[str, str]
) -> dict[str, str]:
    """``environment`` for processor ``processor``'s process, with its metrics port."""
    child = dict(environment)
    port = processor_port(settings, processor)
    if port is not None:
        child[PORT_VARIABLE] = str(port)
    return child
