"""Which processor ``splitstate run`` runs on this host.

In order: ``--processor-id J``; the environment variable ``SPLITSTATE_PROCESSOR_ID``, either
a processor id or ``ordinal``: the ordinal a StatefulSet gives its pod's hostname
(``wordcount-3`` -> 3). A hostname is read as an id only when asked to (``ordinal``): a
machine called ``build-2`` would otherwise run processor 2 by accident.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping

from framework.config import ConfigError

__all__ = ["ENV_VARIABLE", "ORDINAL", "resolve_processor_id"]

ENV_VARIABLE = "SPLITSTATE_PROCESSOR_ID"
#: the value of ``SPLITSTATE_PROCESSOR_ID`` that takes the id from a StatefulSet's hostname
ORDINAL = "ordinal"
_HOSTNAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?-(?P<ordinal>[0-9]+)$")
_NUMBER = re.compile(r"[0-9]+")
_FIX = (
    f"Fix: pass --processor-id J, set {ENV_VARIABLE}=J, set {ENV_VARIABLE}={ORDINAL} in a "
    "StatefulSet's pods (hostname <name>-<ordinal>), or run every processor with --all."
)


def resolve_processor_id(
    given: int | None,
    environ: Mapping[str, str],
    hostname: str | None = None,
    *,
    supervised: bool = False,
) -> tuple[int, str]:
    """The processor id and where it came from (for the start's log line); ``supervised``:
    ``given`` came from the supervisor of ``splitstate run --all``, not from the user."""
    if given is not None:
        if given < 0:
            raise ConfigError(f"processor id {given} (from --processor-id) is negative. {_FIX}")
        return given, "the supervisor of `splitstate run --all`" if supervised else "--processor-id"
    value = environ.get(ENV_VARIABLE)
    if value is None:
        raise ConfigError(f"no processor id given. {_FIX}")
    value = value.strip()
    if _NUMBER.fullmatch(value):
        return int(value), ENV_VARIABLE
    if value != ORDINAL:
        raise ConfigError(
            f"{ENV_VARIABLE}={value!r} is neither a processor id (a whole number from 0) nor "
            f"{ORDINAL!r}. {_FIX}"
        )
    host = socket.gethostname() if hostname is None else hostname
    found = _HOSTNAME.match(host)
    if found is None:
        raise ConfigError(
            f"{ENV_VARIABLE}={ORDINAL} but hostname {host!r} has no StatefulSet ordinal "
            f"(<name>-<ordinal>). {_FIX}"
        )
    return int(found["ordinal"]), f"the StatefulSet ordinal of hostname {host!r}"
