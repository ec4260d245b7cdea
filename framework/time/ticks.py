"""Ticks: recorded progress of time for a partition's keys (the reclocking record).

Keys that receive no records still need time to pass (a session that went quiet must close).
The owner of an input partition decides that from its wall clock and what it read, and
*records* the decision: it appends a tick to the partition itself, in the transaction of the
batch it decided it in. A tick is a record without a key, with header ``TICK_HEADER`` holding
JSON ``{"floor": ms, "wall": ms, "app": app_id, "steps": n}``: an event-time floor, a
processing time, the app whose processor wrote it, and how many steps (growths, shrinks) of
the topic's partition history its writer's view of the topic registry held. Wherever the
tick sits in the partition, every reader meets it at that same position (the live owner, a
restart rebuilding state, a receiver catching up, Spark), and applies it to the keys living
in the partition there by those steps that have something due by then
(``framework.growth.late.Homes.takes_tick``: a step its writer did not know brings the tick
no key, one that moved keys away at a marker before it takes those keys from it). So what it
changes is decided once, by the log and the steps it names, not by when or where it is read,
nor by how new the reader's view of the registry is. A tick without ``steps`` (not a
processor's: a test's, ``TestDriver``'s, or one written before ticks named them) is judged by
every step the reader knows (a processor reads the registry again first), which a shrink
recorded after the tick was read can still change.

A tick the canonical order forces (``framework.runtime.ordering``: written only to let what
waits go, nothing waits for it) carries a second header, ``FORCED_HEADER``, whose value is the
version of that mark (``FORCED_VERSION``, ``b"1"``); ``is_forced_tick`` says whether a tick
carries it. A tick written before forced ticks said so (no such header), or with a version
this reader does not know, is not known to be forced: a reader takes it for a tick something
may wait for. Readers that do not know the header pass it over (``read_tick`` reads only
``TICK_HEADER``), so a forced tick reads as any tick there.

Several apps may read one input; each applies only its own ticks (``TickRead.applies_to``):
another app's floor comes from that app's clock and its ``idle_after``, and is passed over like
a record of a key the app does not have. A tick without ``"app"`` (written before ticks named
their app) applies to every app reading it: that is what every reader did when it was read
live, so a replay of such a log (a restart, a catch-up, Spark) changes what the live run
changed, no more and no less.

A compacted topic refuses records without a key, so there a tick has one of its own,
``<topic>/splitstate.tick/<unique id>`` (``tick_key``): no record of the app's shares it, so
the log cleaner never removes a tick, and no reader takes it for a key of the app's
(``is_tick_record``: the header and no key, or a key of that form).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, TypeGuard

import orjson

from framework.records import InputMessage, readable_headers

__all__ = [
    "FORCED_HEADER",
    "FORCED_VERSION",
    "TICK_HEADER",
    "TIME_LIMIT",
    "TickRead",
    "is_forced_tick",
    "is_tick",
    "is_tick_key",
    "is_tick_message",
    "is_tick_record",
    "read_tick",
    "tick_headers",
    "tick_key",
]

#: the header that makes a keyless record a tick
TICK_HEADER = "splitstate.tick"
#: the header that marks a tick the canonical order forced; its value: ``FORCED_VERSION``
FORCED_HEADER = "splitstate.tick.forced"
#: the version of the forced mark written now (the only one read as forced)
FORCED_VERSION = b"1"
#: the largest size of a time (ms) a tick holds, and of an event time (``specs.event_time_of``)
TIME_LIMIT = (1 << 62) - 1
#: the fields of a tick's header (``"app"`` and ``"steps"`` may be missing: ``TickRead``)
_FIELDS = frozenset({"floor", "wall", "app", "steps"})
#: the largest number of history steps a tick names
_STEPS_LIMIT = (1 << 31) - 1
#: the longest app id a tick names (``framework.config``: app ids have 1-200 characters)
_APP_LIMIT = 200


class TickRead(NamedTuple):
    """A tick's times, the app that wrote it (``None``: a tick of before ticks named it), and
    ``steps``: how many steps of its topic's partition history its writer knew (``None``: not
    said; then every step the reader knows counts)."""

    floor: int
    wall: int
    app: str | None = None
    steps: int | None = None

    def applies_to(self, app_id: str) -> bool:
        """Whether app ``app_id`` applies this tick: its own, or one that names no app."""
        return self.app is None or self.app == app_id


def is_tick(headers: Sequence[tuple[str, bytes | None]]) -> bool:
    """Whether a keyless record with ``headers`` claims to be a tick."""
    return any(name == TICK_HEADER for name, _value in headers)


def is_forced_tick(headers: Sequence[tuple[str, bytes | None]]) -> bool:
    """Whether a tick with ``headers`` says the canonical order forced it (``FORCED_HEADER``
    with a version this reader knows); a tick of before forced ticks said so: ``False``."""
    return any(name == FORCED_HEADER and value == FORCED_VERSION for name, value in headers)


def tick_key(topic: str, unique: str) -> bytes:
    """The key of a tick of compacted ``topic`` (``unique``: an id no other tick has)."""
    return f"{topic}/{TICK_HEADER}/{unique}".encode()


def is_tick_key(topic: str, key: bytes) -> bool:
    """Whether ``key`` has the form of a tick's key of ``topic`` (``tick_key``)."""
    return key.startswith(f"{topic}/{TICK_HEADER}/".encode())


def is_tick_record(
    topic: str, key: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> bool:
    """Whether a record of ``topic`` claims to be a tick: a ``TICK_HEADER`` header, and no key
    or a tick's key (a compacted topic's, ``tick_key``). A keyed record of another key is an
    ordinary record, whatever its headers."""
    return (key is None or is_tick_key(topic, key)) and is_tick(headers)


def is_tick_message(topic: str, message: InputMessage) -> bool:
    """Whether ``message``, read from ``topic``, claims to be a tick (``is_tick_record``;
    its headers are read only when its key is none or a tick's)."""
    key = message.key()
    if key is not None and not is_tick_key(topic, key):
        return False
    headers = readable_headers(message)
    return headers is not None and is_tick(headers)


def read_tick(headers: Sequence[tuple[str, bytes | None]]) -> TickRead | str:  # noqa: PLR0911
    """The tick ``headers`` hold, or why they hold none (a dead letter's reason)."""
    values = [value for name, value in headers if name == TICK_HEADER]
    if len(values) != 1 or values[0] is None:
        return f"a tick has exactly one {TICK_HEADER} header with a value"
    try:
        data = orjson.loads(values[0])
    except orjson.JSONDecodeError as error:
        return f"its {TICK_HEADER} header is not JSON ({error})"
    if not isinstance(data, dict) or not {"floor", "wall"} <= set(data) <= _FIELDS:
        return (
            f'its {TICK_HEADER} header is not {{"floor": ms, "wall": ms, "app": app_id, '
            '"steps": n}'
        )
    floor, wall, app, steps = data["floor"], data["wall"], data.get("app"), data.get("steps")
    for value in (floor, wall):
        if not _whole(value) or abs(value) > TIME_LIMIT:
            return f"its {TICK_HEADER} times are not whole milliseconds in range: {data!r}"
    if "app" in data and not (isinstance(app, str) and 0 < len(app) <= _APP_LIMIT):
        return f"its {TICK_HEADER} app is not an app id (text of 1-{_APP_LIMIT}): {app!r}"
    if "steps" in data and not (_whole(steps) and 0 <= steps <= _STEPS_LIMIT):
        return f"its {TICK_HEADER} steps are not a count of history steps: {data!r}"
    return TickRead(floor, wall, app, steps)


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def tick_headers(
    floor: int,
    wall: int,
    app: str | None = None,
    *,
    steps: int | None = None,
    forced: bool = False,
) -> list[tuple[str, bytes]]:
    """The headers of a tick with event-time ``floor`` and processing time ``wall``, written
    by app ``app`` (``None``: one that names no app, as ticks were before they named it)
    knowing ``steps`` steps of its topic's partition history (``None``: not said);
    ``forced``: one the canonical order forces (``FORCED_HEADER``)."""
    data: dict[str, int | str] = {"floor": floor, "wall": wall}
    if app is not None:
        data["app"] = app
    if steps is not None:
        data["steps"] = steps
    headers = [(TICK_HEADER, orjson.dumps(data))]
    if forced:
        headers.append((FORCED_HEADER, FORCED_VERSION))
    return headers
