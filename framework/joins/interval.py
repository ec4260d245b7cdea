"""The interval (stream-stream) join: ``App.interval_join``. For a key, a left record at
time ``t`` and a right record at time ``s`` match when ``t - before <= s <= t + after``.

Both sides' records are buffered in the key's range (``framework.joins.buffer``, store
``splitstate.join.<name>``) and applied in the canonical order of the app's inputs, so:

- each match is emitted **once**, when the second of the two is applied (its function call
  gets the other from the buffer);
- with the key's time ``K`` (``framework.time``: the largest event time of its records and
  of the recorded ticks applied to it), a record at time ``x`` is **late** when
  ``x + grace < K``: a dead letter of stage ``late``, as a late window record is. So a right
  record still to come has ``s >= K - grace``;
- hence a buffered left record at ``t`` can match no record still to come once
  ``K > t + after + grace`` (a right one at ``s`` once ``K > s + before + grace``): it is
  then dropped, and with ``how="left"``/``"outer"`` (``"outer"`` for a right one too) the
  function is called with ``None`` for the other side if it never matched. That is a timer
  of the key (timer store ``splitstate.join.<name>.expiry``) due at the earliest such time,
  so it fires by the key's records or by a tick, as windows close: exact on every path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from framework.decoding import decoder
from framework.errors import describe_error
from framework.joins.buffer import Buffered, DamagedJoinError, JoinBuffer, Side
from framework.records import Output, Record, StoredMessage, output_items
from framework.time.failed import RecordFailedError
from framework.time.specs import EventTime, Timer, event_time_of
from framework.time.ticks import TIME_LIMIT
from framework.time.views import KeyTimers
from framework.time.window_state import LateError

__all__ = [
    "JOIN_PREFIX",
    "IntervalJoinSpec",
    "JoinExpiry",
    "JoinFunction",
    "JoinLateError",
    "JoinSide",
    "JoinType",
]

#: an interval join's buffers live in store ``splitstate.join.<name>`` (one of splitstate's)
JOIN_PREFIX = "splitstate.join."
#: ``function(left, right)``: a match (or, ``how`` permitting, a record that matched nothing,
#: with ``None`` for the other side) -> outputs
JoinFunction = Callable[[Any, Any], Output | Iterable[Output] | None]
JoinType = Literal["inner", "left", "outer"]
#: the name of the one timer each key of a join has (of its timer store)
_TIMER = "expiry"


@dataclass(frozen=True)
class IntervalJoinSpec:
    """An interval join of inputs ``left`` and ``right`` (see the module): the window
    ``[t - before, t + after]`` around a left record's time ``t`` (ms), the ``grace`` (ms) the
    key's time may run ahead of a record still applied, ``how`` (``inner``, ``left``,
    ``outer``), the function called for each match, and each side's value type and event
    time (as a processor's)."""

    name: str
    left: str
    right: str
    before: int
    after: int
    grace: int
    how: JoinType
    function: JoinFunction
    left_type: type[Any] | None = None
    right_type: type[Any] | None = None
    left_time: EventTime = None
    right_time: EventTime = None
    _rules: dict[str, Callable[[Record[Any]], int]] = field(init=False, repr=False, compare=False)
    _decoders: dict[str, Callable[[bytes | None], Any]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        rules = {"l": event_time_of(self.left_time), "r": event_time_of(self.right_time)}
        decoders = {"l": decoder(self.left_type), "r": decoder(self.right_type)}
        object.__setattr__(self, "_rules", rules)
        object.__setattr__(self, "_decoders", decoders)

    @property
    def store(self) -> str:
        """The store of the keys' buffered records."""
        return JOIN_PREFIX + self.name

    @property
    def timer_store(self) -> str:
        """The timer store of the keys' expiry timers."""
        return f"{JOIN_PREFIX}{self.name}.expiry"

    def topic(self, side: Side) -> str:
        """The input topic of ``side``."""
        return self.left if side == "l" else self.right

    def closes_after(self, side: Side, t: int) -> int:
        """The key time after which a record of ``side`` at ``t`` can match nothing to come
        (it is dropped once the key's time is above it)."""
        return t + (self.after if side == "l" else self.before) + self.grace

    def matches(self, side: Side, t: int, other: int) -> bool:
        """Whether a record of ``side`` at ``t`` and one of the other side at ``other`` match."""
        left, right = (t, other) if side == "l" else (other, t)
        return left - self.before <= right <= left + self.after

    def time_of(self, side: Side, record: Record[Any]) -> int:
        """A record's event time by ``side``'s rule (as the key's time takes it)."""
        return self._rules[side](record)

    def record_of(self, side: Side, key: bytes, item: Buffered) -> Record[Any]:
        """A buffered record of ``side``, as the function gets it (no headers)."""
        topic = self.topic(side)
        message = StoredMessage(
            topic, item.partition, item.offset, key, item.raw, item.timestamp, None
        )
        value = self._decoders[side](item.raw)
        return Record(topic, item.partition, item.offset, key, value, message=message)


class JoinLateError(LateError):
    """A join record older than the key's time less the join's grace."""

    def __init__(self, spec: IntervalJoinSpec, t: int, key_time: int) -> None:
        super().__init__(t, key_time, t + spec.grace)
        Exception.__init__(
            self,
            f"late by {self.by} ms for interval join {spec.name!r}: event time {t} ms plus "
            f"its grace ({spec.grace} ms) is below the key's time, {key_time} ms, so records "
            "it could have matched may be gone. Fix: a larger grace= on the join",
        )


class JoinSide:
    """The processor function ``App.interval_join`` registers for one side's input: it
    matches the record with the other side's buffered records, calls the join's function
    for each match (in the order they were buffered), and buffers the record."""

    __slots__ = ("__name__", "side", "spec")

    def __init__(self, spec: IntervalJoinSpec, side: Side) -> None:
        self.spec = spec
        self.side: Side = side
        self.__name__ = getattr(spec.function, "__name__", spec.name)

    def __call__(self, record: Record[Any], state: dict[str, Any]) -> list[Output]:
        """Apply ``record`` of this side (``state``: the join's buffer and timers)."""
        spec, side = self.spec, self.side
        timers: KeyTimers = state[spec.timer_store]
        stored = state[spec.store]
        t = spec.time_of(side, record)
        key_time = timers.key_time
        if key_time is not None and t + spec.grace < key_time:
            raise JoinLateError(spec, t, key_time)
        buffer = _decode(spec, record.key, stored.get(), "The record was not applied")
        other: Side = "r" if side == "l" else "l"
        outputs: list[Output] = []
        item = Buffered(t, record.partition, record.offset, record.timestamp, record.raw)
        for waiting in buffer.sides[other]:
            if not spec.matches(side, t, waiting.time):
                continue
            waiting.matched = item.matched = True
            found = spec.record_of(other, record.key, waiting)
            pair = (record, found) if side == "l" else (found, record)
            outputs += _outputs(spec, *pair)
        buffer.sides[side].append(item)
        _save(spec, buffer, stored, timers)
        return outputs


class JoinExpiry:
    """The timer function of a join's expiry timers: drops each buffered record that can
    match nothing still to come and, ``how`` permitting, calls the function for those that
    never matched (with ``None`` for the other side), the earliest to expire first. Each such
    call is its own unit: one that fails is a dead letter of its own (``KeyTimers.dead_letter``)
    and its record is dropped all the same, while the others are emitted."""

    __slots__ = ("__name__", "spec")

    def __init__(self, spec: IntervalJoinSpec) -> None:
        self.spec = spec
        self.__name__ = getattr(spec.function, "__name__", spec.name)

    def __call__(self, timer: Timer, state: dict[str, Any]) -> list[Output]:
        """Expire what the key's time (``timer.key_time``) has passed."""
        spec = self.spec
        timers: KeyTimers = state[spec.timer_store]
        stored = state[spec.store]
        buffer = _decode(spec, timer.key, stored.get(), "Nothing expired")
        now = timer.key_time
        gone: list[tuple[int, int, int, Side, Buffered]] = []
        sides: tuple[Side, Side] = ("l", "r")
        for rank, side in enumerate(sides):
            kept: list[Buffered] = []
            for index, item in enumerate(buffer.sides[side]):
                closes = spec.closes_after(side, item.time)
                if closes < now:
                    gone.append((closes, rank, index, side, item))
                else:
                    kept.append(item)
            buffer.sides[side] = kept
        outputs: list[Output] = []
        for _closes, _rank, _index, side, item in sorted(gone, key=lambda g: g[:3]):
            if item.matched or not _emits_unmatched(spec.how, side):
                continue
            try:  # (each its own unit: a failing one is a dead letter, the others go on)
                alone = spec.record_of(side, timer.key, item)
                pair = (alone, None) if side == "l" else (None, alone)
                outputs += _outputs(spec, *pair)
            except Exception as error:  # any failure of user code is handled by the policy
                where = f"{spec.topic(side)}[{item.partition}]@{item.offset}"
                timers.dead_letter(
                    item.raw,
                    f"interval join {spec.name!r} failed on the unmatched record {where} "
                    f"({describe_error(error, with_trace=True)}). Fix the function (or the "
                    "record's value)",
                )
        _save(spec, buffer, stored, timers)
        return outputs


def _emits_unmatched(how: JoinType, side: Side) -> bool:
    return how == "outer" or (how == "left" and side == "l")


def _outputs(spec: IntervalJoinSpec, left: Any, right: Any) -> list[Output]:
    result = spec.function(left, right)
    name = getattr(spec.function, "__name__", spec.name)
    return [] if result is None else list(output_items(result, name))


def _save(spec: IntervalJoinSpec, buffer: JoinBuffer, stored: Any, timers: KeyTimers) -> None:
    """Store ``buffer`` and set the expiry timer to its earliest record's expiry."""
    encoded = buffer.encode()
    if encoded is None:
        stored.delete()
        timers.cancel(_TIMER)
        return
    stored.set(encoded)
    due = min(
        spec.closes_after(side, item.time) + 1
        for side, items in buffer.sides.items()
        for item in items
    )
    if due <= TIME_LIMIT:
        timers.set(due, _TIMER)
    elif (timers.key_time or 0) < TIME_LIMIT:  # (none expires before the largest time)
        timers.set(TIME_LIMIT, _TIMER)
    else:  # (the key's time is the largest: what is buffered stays, and may still match)
        timers.cancel(_TIMER)


def _decode(spec: IntervalJoinSpec, key: bytes, data: bytes | None, done: str) -> JoinBuffer:
    """``key``'s buffer; a damaged one fails what reads it as a ``decode`` dead letter
    naming the fix, the buffer kept as it is."""
    try:
        return JoinBuffer.decode(data)
    except DamagedJoinError as error:
        reason = (
            f"the buffer of key {key!r} of interval join {spec.name!r} (store {spec.store!r}) "
            f"is not in the form splitstate writes ({error}): a damaged or foreign state file. "
            f"{done}; the key's state is kept as it is. Fix: restore the processor's state from "
            "a snapshot or rebuild it (`splitstate backfill MODULE:APP --replace`); "
            f"`splitstate state dump --store {spec.store}` shows the buffer"
        )
        raise RecordFailedError("decode", reason, error) from None
