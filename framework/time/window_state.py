"""A key's open windows of one window store, as JSON in its time record, by window kind.

- Tumbling and hopping: ``[[start, accumulator], ...]`` by start; each closes at
  ``start + size + grace``.
- Session: ``[[first, last, accumulator], ...]`` by first; each closes at
  ``last + gap + grace``. A record less than ``gap`` from a session joins it (and may join
  two into one: their accumulators merge, the earlier's first).
- Sliding: ``{"p": [[t, accumulator], ...], "o": [t, ...]}``: the points (one per record, in
  the key's record order) and the ends of the windows not closed yet; the window ending at
  ``t`` holds the points in ``[t - size, t]`` and closes when the key's time passes
  ``t + grace`` (at ``t + grace + 1``: a record at ``t`` itself is in it). A record whose
  own window closed already goes to the open windows that hold it (late if there are none).

``add`` raises ``LateError`` when every window a record falls into closed already (the key's time
is at or past its close). Nothing here reads a clock: the caller gives the key's time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from framework.time.aggregations import Aggregation
from framework.time.windows import Hopping, Session, Sliding, Tumbling, WindowKind
from statestore.due_index import NEVER

__all__ = [
    "LateError",
    "Unmerged",
    "WindowResult",
    "accumulator",
    "add",
    "check",
    "close_next",
    "merged_away",
    "next_close",
    "open_results",
]


@dataclass(frozen=True)
class WindowResult:
    """One window's result: ``[start, end)`` (sliding and session windows: ``[start, end]``,
    ``end`` the last record's time) and its aggregated ``value``."""

    key: bytes
    start: int
    end: int
    value: Any


class LateError(Exception):
    """A record whose windows closed before it came (``by``: how far its event time is behind
    the key's time, in ms)."""

    def __init__(self, t: int, key_time: int, closed_at: int) -> None:
        self.t = t
        self.key_time = key_time
        self.closed_at = closed_at
        self.by = key_time - t
        super().__init__(
            f"late by {self.by} ms: event time {t} ms falls in windows that closed when the "
            f"key's time reached {closed_at} ms (window end plus grace); the key's time is "
            f"{key_time} ms"
        )


class Unmerged:
    """The accumulator of a sliding window that closed, before its ``points`` (their dumped
    accumulators, in the key's record order) are merged. The merge is the aggregation's (a
    ``Reduce``'s is the app's code, which may fail), so it is not done where the window is
    closed but where its result is computed (``accumulator``): a failure there is the window's
    dead letter, and a window that emits nothing (``emit="current"``) is never merged."""

    __slots__ = ("_agg", "points")

    def __init__(self, agg: Aggregation, points: list[Any]) -> None:
        self._agg = agg
        self.points = points

    def merged(self) -> Any:
        """The window's accumulator (dumped): its points merged."""
        return _merge_points(self._agg, self.points)


def accumulator(stored: Any) -> Any:
    """A closed window's accumulator as stored (dumped): ``stored``, or an ``Unmerged`` one's
    points merged (this runs the aggregation's ``merge``)."""
    return stored.merged() if isinstance(stored, Unmerged) else stored


def add(
    kind: WindowKind, agg: Aggregation, data: Any, t: int, value: Any, *, key_time: int
) -> tuple[Any, list[tuple[int, int, Any]]]:
    """``data`` with ``value`` added at event time ``t``, and the ``(start, end,
    accumulator)`` of each window it changed; ``LateError`` when it falls in no open window."""
    if type(kind) is Tumbling:  # (the common case first)
        return _tumbling_add(kind, agg, data or [], t, value, key_time=key_time)
    if isinstance(kind, Session):
        return _session_add(kind, agg, data or [], t, value, key_time=key_time)
    if isinstance(kind, Sliding):
        return _sliding_add(kind, agg, data or {"p": [], "o": []}, t, value, key_time=key_time)
    return _span_add(kind, agg, data or [], t, value, key_time=key_time)


def check(kind: WindowKind, data: Any) -> str | None:
    """What is wrong with ``data`` (as read from JSON) as the open windows of ``kind``
    (``None``: nothing; the accumulators are the aggregation's to read). Per record, so
    plain loops: orjson gives exact ``list``, ``dict`` and ``int``."""
    if not data:
        return None
    if type(kind) is Tumbling:  # (the common case first: isinstance() of others is slower)
        return None if _rows(data, 1) else "is not [[start ms, accumulator], ...]"
    if isinstance(kind, Sliding):
        ends = data.get("o") if type(data) is dict and data.keys() == {"p", "o"} else None
        if type(ends) is list and _rows(data["p"], 1) and all(type(e) is int for e in ends):
            return None
        return 'is not {"p": [[ms, accumulator], ...], "o": [ms, ...]}'
    if isinstance(kind, Session):
        return None if _rows(data, 2) else "is not [[first ms, last ms, accumulator], ...]"
    return None if _rows(data, 1) else "is not [[start ms, accumulator], ...]"


def _rows(data: Any, times: int) -> bool:
    """Whether ``data`` is a list of rows of ``times`` milliseconds and an accumulator."""
    if type(data) is not list:
        return False
    for row in data:
        if type(row) is not list or len(row) != times + 1 or type(row[0]) is not int:
            return False
        if times > 1 and type(row[1]) is not int:  # (a session's last)
            return False
    return True


def next_close(kind: WindowKind, data: Any) -> int:
    """When the earliest open window closes (``NEVER``: none open)."""
    if not data:
        return NEVER
    if type(kind) is Tumbling:  # (the common case first)
        return int(data[0][0]) + kind.size + kind.grace
    if isinstance(kind, Session):
        return int(min(last for _first, last, _acc in data)) + kind.gap + kind.grace
    if isinstance(kind, Sliding):
        return min(data["o"]) + kind.grace + 1 if data["o"] else NEVER
    return int(data[0][0]) + kind.size + kind.grace


def close_next(
    kind: WindowKind, agg: Aggregation, data: Any, key_time: int
) -> tuple[Any, tuple[int, int, Any]]:
    """``data`` without its earliest closing window, and that window's ``(start, end,
    accumulator)`` (a sliding window's: ``Unmerged``; nothing here runs the aggregation)."""
    if isinstance(kind, Session):
        at = min(range(len(data)), key=lambda i: (data[i][1], data[i][0]))
        first, last, acc = data[at]
        rest = data[:at] + data[at + 1 :]
        return rest, (first, last, acc)
    if isinstance(kind, Sliding):
        return _sliding_close(kind, agg, data, key_time)
    start, acc = data[0]
    return data[1:], (start, start + kind.size, acc)


def merged_away(kind: WindowKind, before: Any, after: Any) -> list[int]:
    """The starts of the windows in ``before`` that ``add`` merged into others in ``after``
    (sessions only: a record that joins sessions makes one of them)."""
    if not isinstance(kind, Session) or not before:
        return []
    return sorted({s[0] for s in before} - {s[0] for s in after})


def open_results(kind: WindowKind, agg: Aggregation, data: Any) -> list[tuple[int, int, Any]]:
    """``(start, end, accumulator)`` of every open window."""
    if not data:
        return []
    if isinstance(kind, Session):
        return [(first, last, acc) for first, last, acc in data]
    if isinstance(kind, Sliding):
        return [(end - kind.size, end, _sliding_acc(kind, agg, data, end)) for end in data["o"]]
    return [(start, start + kind.size, acc) for start, acc in data]


# -- tumbling and hopping ---------------------------------------------------------------------


def _span_add(
    kind: Tumbling | Hopping,
    agg: Aggregation,
    data: list[Any],
    t: int,
    value: Any,
    *,
    key_time: int,
) -> tuple[Any, list[tuple[int, int, Any]]]:
    spans = [(s, e) for s, e in kind.spans(t) if e + kind.grace > key_time]
    if not spans:
        raise LateError(t, key_time, kind.spans(t)[-1][1] + kind.grace)
    held = {int(start): acc for start, acc in data}
    changed = []
    for start, end in spans:
        acc = agg.add(agg.load(held[start]) if start in held else agg.initial(), value)
        held[start] = agg.dump(acc)
        changed.append((start, end, held[start]))
    return [[start, held[start]] for start in sorted(held)], changed


def _tumbling_add(
    kind: Tumbling, agg: Aggregation, data: list[Any], t: int, value: Any, *, key_time: int
) -> tuple[Any, list[tuple[int, int, Any]]]:
    """``_span_add`` of the one window of a tumbling kind, without rebuilding the others:
    ``data`` is kept sorted by start, so the new list is ``data`` with that window's entry
    replaced or inserted (the other entries are shared: nothing changes one in place)."""
    start = t - t % kind.size
    end = start + kind.size
    if end + kind.grace <= key_time:
        raise LateError(t, key_time, end + kind.grace)
    at = len(data)
    while at and data[at - 1][0] > start:  # (from the newest: records come mostly in order)
        at -= 1
    if at and data[at - 1][0] == start:
        acc = agg.dump(agg.add(agg.load(data[at - 1][1]), value))
        return [*data[: at - 1], [start, acc], *data[at:]], [(start, end, acc)]
    acc = agg.dump(agg.add(agg.initial(), value))
    return [*data[:at], [start, acc], *data[at:]], [(start, end, acc)]


# -- sessions ---------------------------------------------------------------------------------


def _session_add(
    kind: Session, agg: Aggregation, data: list[Any], t: int, value: Any, *, key_time: int
) -> tuple[Any, list[tuple[int, int, Any]]]:
    joined = [s for s in data if s[0] - kind.gap < t < s[1] + kind.gap]
    kept = [s for s in data if not (s[0] - kind.gap < t < s[1] + kind.gap)]
    first = min([t, *(s[0] for s in joined)])
    last = max([t, *(s[1] for s in joined)])
    if last + kind.gap + kind.grace <= key_time:  # (a record in an open session is not late)
        raise LateError(t, key_time, last + kind.gap + kind.grace)
    acc = None
    for session in joined:  # (by first: data is kept sorted)
        loaded = agg.load(session[2])
        acc = loaded if acc is None else agg.merge(acc, loaded)
    acc = agg.add(agg.initial() if acc is None else acc, value)
    entry = [first, last, agg.dump(acc)]
    return sorted([*kept, entry], key=lambda s: (s[0], s[1])), [(first, last, entry[2])]


# -- sliding ----------------------------------------------------------------------------------


def _sliding_add(
    kind: Sliding, agg: Aggregation, data: dict[str, Any], t: int, value: Any, *, key_time: int
) -> tuple[Any, list[tuple[int, int, Any]]]:
    # a window ending at ``end`` holds ``end`` itself: it is open until the key's time passes
    # ``end + grace``; a record whose own window closed still goes to the open ones holding it
    holding = [e for e in data["o"] if e + kind.grace >= key_time and e - kind.size <= t <= e]
    own = t + kind.grace >= key_time
    if not own and not holding:
        raise LateError(t, key_time, t + kind.grace + 1)
    points = [*data["p"], [t, agg.dump(agg.add(agg.initial(), value))]]
    ends = sorted({*data["o"], t}) if own else data["o"]
    new = {"p": points, "o": ends}
    changed = [
        (end - kind.size, end, _sliding_acc(kind, agg, new, end))
        for end in sorted({*holding, t} if own else holding)
    ]
    return new, changed


def _sliding_acc(kind: Sliding, agg: Aggregation, data: dict[str, Any], end: int) -> Any:
    return _merge_points(agg, _held(kind, data, end))


def _held(kind: Sliding, data: dict[str, Any], end: int) -> list[Any]:
    """The points (dumped accumulators) the window ending at ``end`` holds, in record order."""
    return [point for t, point in data["p"] if end - kind.size <= t <= end]


def _merge_points(agg: Aggregation, points: list[Any]) -> Any:
    acc = None
    for point in points:
        loaded = agg.load(point)
        acc = loaded if acc is None else agg.merge(acc, loaded)
    return agg.dump(agg.initial() if acc is None else acc)


def _sliding_close(
    kind: Sliding, agg: Aggregation, data: dict[str, Any], key_time: int
) -> tuple[Any, tuple[int, int, Any]]:
    end, *ends = data["o"]
    acc = Unmerged(agg, _held(kind, data, end))
    # a later record that is not late (t > key time - grace) opens [t - size, t]: keep the
    # points any open or future window holds
    keep_from = min([*ends, key_time - kind.grace]) - kind.size
    points = [p for p in data["p"] if p[0] >= keep_from]
    return ({"p": points, "o": ends} if ends or points else None), (end - kind.size, end, acc)
