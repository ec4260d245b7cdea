"""Which processor ``splitstate run`` runs on this host.

In order: ``--processor-id J``; the environment variable ``SPLITSTATE_PROCESSOR_ID``; in a
Kubernetes pod (``KUBERNETES_SERVICE_HOST`` set), the ordinal a StatefulSet gives its pod's
hostname (``wordcount-3`` -> 3). Outside Kubernetes a hostname is never read as an id: a
machine called ``build-2`` would otherwise run processor 2 by accident.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping

from framework.config import ConfigError

__all__ = ["ENV_VARIABLE", "resolve_processor_id"]

ENV_VARIABLE = "SPLITSTATE_PROCESSOR_ID"
_ORDINAL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?-(?P<ordinal>\d+)$")
_FIX = (
    "Fix: pass --processor-id J, set SPLITSTATE_PROCESSOR_ID=J, run it as a pod of a "
    "StatefulSet (hostname <name>-<ordinal>), or run every processor with --all."
)


def resolve_processor_id(
    given: int | None, environ: Mapping[str, str], hostname: str | None = None
) -> tuple[int, str]:
    """The processor id and where it came from (for the start's log line)."""
    if given is not None:
        return _checked(given, "--processor-id"), "--processor-id"
    value = environ.get(ENV_VARIABLE)
    if value is not None:
        try:
            number = int(value.strip())
        except ValueError:
            raise ConfigError(
                f"{ENV_VARIABLE}={value!r} is not a processor id (a whole number from 0). {_FIX}"
            ) from None
        return _checked(number, ENV_VARIABLE), ENV_VARIABLE
    if environ.get("KUBERNETES_SERVICE_HOST"):
        host = socket.gethostname() if hostname is None else hostname
        found = _ORDINAL.match(host)
        if found is None:
            raise ConfigError(
                f"no processor id: this pod's hostname {host!r} has no StatefulSet ordinal "
                f"(<name>-<ordinal>). {_FIX}"
            )
        return int(found["ordinal"]), f"the StatefulSet ordinal of hostname {host!r}"
    raise ConfigError(f"no processor id given. {_FIX}")


def _checked(number: int, source: str) -> int:
    if number < 0:
        raise ConfigError(f"processor id {number} (from {source}) is negative. {_FIX}")
    return number
