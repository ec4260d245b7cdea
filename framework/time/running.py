"""Running an app's functions with time: a keyed record through its key's time, a timer's
function, and a tick over the keys it makes something due for.

Everything one record (or one tick) does to a key is undone together when the function fails:
its state writes, its time (windows, timers, expiries) and what its timers did. A timer whose
function fails is dropped, a dead letter (stage ``timer``; ``decode`` for a ``RecordFailedError``
of it; a part it drops, ``KeyTimers.dead_letter``, is one alone); a record whose windows all
closed is a dead letter (stage ``late``) unless the window store has ``on_late``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from framework.app import App
from framework.errors import ProcessorStoppedError, describe_error
from framework.records import (
    DeadLetter,
    DeadLetterStage,
    EncodedOutput,
    Output,
    Record,
    encode_value,
    output_items,
)
from framework.tables import DamagedTableError, Tables
from framework.time.context import KeyTime
from framework.time.damaged import damaged_reason, load_for_record
from framework.time.due_items import DueItem
from framework.time.failed import RecordFailedError
from framework.time.keeper import TimeKeeper, due_times
from framework.time.key_clock import TIME_STORE
from framework.time.specs import NoEventTimeError, Timer, TimerSpec, WindowSpec, event_time_of
from framework.time.views import ExpiringState, KeyTimers, KeyWindows, WindowAdder, add_value
from framework.time.window_letters import window_letter
from framework.time.window_state import LateError, accumulator
from statestore import StateBatch
from statestore.due_index import DUE_STORE

__all__ = ["RecordFailedError", "TimedFunctions"]

#: ``(result, key, origin, function) -> encoded outputs`` (``OutputEncoder.encode``)
Encode = Callable[[Any, bytes, tuple[str, int, int], Callable[..., Any]], list[EncodedOutput]]


class _RefusedError(Exception):
    """A timer or window result dropped as failed, not for an error of its function (the
    reason says why)."""


class TimedFunctions:
    """The app's functions run with its keys' time (``App.uses_time``)."""

    def __init__(self, app: App, encode: Encode, stop_on_error: bool) -> None:
        self.app = app
        self._encode = encode
        self.stop_on_error = stop_on_error
        self.keeper = TimeKeeper(
            app.windows,
            app.timers,
            self._run_timer,
            self._close,
            self._refuse_timer,
            expiring=app.ttls,
            damaged=self._passed_over,
            refuse_close=self._refuse_close,
        )
        self._event_times = {
            topic: event_time_of(handler.event_time) for topic, handler in app.handlers.items()
        }
        joins = [spec.store for spec in app.interval_joins.values()]
        self._stores = [*app.stores, TIME_STORE, DUE_STORE, *joins]
        #: the processor functions ``@app.window`` registered, when firing what is due
        #: writes nothing to the batch (no timer function runs, no expired value is deleted:
        #: only windows close): ``_add`` applies their records
        self._adders = frozenset(
            handler.function
            for handler in app.handlers.values()
            if isinstance(handler.function, WindowAdder)
            and handler.stores == (handler.function.store,)
            and not app.timers
            and not app.ttls
        )
        self._tables = Tables(app.tables)  # (tables' views; their records are not applied here)
        #: dead letters of failed timers, for the record or tick being applied
        self.letters: list[DeadLetter] = []
        #: the event time of the record applied last (``None``: it had none)
        self.event_time: int | None = None
        self._origin: tuple[str, int, int] = ("", -1, -1)
        #: applying a tick (a timer's function then knows the processing time now)
        self._ticking = False

    # -- a record ---------------------------------------------------------------------------

    def record(
        self,
        batch: StateBatch,
        record: Record[Any],
        function: Callable[..., Any],
        stores: Sequence[str],
    ) -> list[EncodedOutput]:
        """Apply ``record`` (decoded) to its key: its time, ``function`` with ``stores``,
        and whatever fell due. ``RecordFailedError`` when it failed (every write undone)."""
        if function in self._adders:
            return self._add(batch, record, function)
        key = record.key
        origin = self._origin = (record.topic, record.partition, record.offset)
        self._ticking = False
        saved = self._savepoints(batch, key)
        letters_before = len(self.letters)
        self.event_time = None
        try:
            event_time = self.event_time = self._event_time(record)
            keeper = self.keeper
            time = load_for_record(keeper, batch, key)
            time.record = record
            outputs: list[Output] = keeper.advance(batch, time, record.topic, event_time)
            try:
                state = self.state(batch, key, time, stores)
            except DamagedTableError as error:  # (a table's data of the key: before the function)
                raise RecordFailedError("decode", str(error), error) from None
            result = function(record, state)
            if result is not None:
                outputs += output_items(result, getattr(function, "__name__", "function"))
            outputs += time.outputs
            time.outputs = []
            outputs += keeper.settle(batch, time)  # what it made due (a timer set before now)
            return self._encode(outputs, key, origin, function) if outputs else []
        except LateError as late:
            self._undo(batch, key, saved, letters_before)
            raise RecordFailedError("late", str(late), late) from late
        except (ProcessorStoppedError, RecordFailedError):
            self._undo(batch, key, saved, letters_before)
            raise
        except Exception as error:  # any failure of user code is handled by the policy
            self._undo(batch, key, saved, letters_before)
            raise RecordFailedError(
                "processor", describe_error(error, with_trace=True), error
            ) from error

    def _add(
        self, batch: StateBatch, record: Record[Any], adder: WindowAdder
    ) -> list[EncodedOutput]:
        """``record`` as ``record`` applies it with ``adder`` (``@app.window``'s function,
        in an app whose firing writes nothing: ``_adders``), in fewer steps and with the
        same results: the key's time is written once, after everything else succeeded, so a
        failure has nothing to undo in the batch (no savepoints are taken)."""
        key = record.key
        origin = self._origin = (record.topic, record.partition, record.offset)
        self._ticking = False
        letters_before = len(self.letters)
        self.event_time = None
        keeper = self.keeper
        try:
            event_time = self.event_time = self._event_time(record)
            time = load_for_record(keeper, batch, key)
            time.record = record
            clock = time.clock
            clock.observe(record.topic, event_time)
            time.event_time = event_time
            loaded = time.loaded_due
            outputs: list[Output] = []
            if loaded is not None and (loaded[0] <= clock.time or loaded[1] <= clock.wall):
                outputs = keeper.fire(batch, time)
            add_value(time, self.app.windows[adder.store], adder.value(record), event_time)
            if time.outputs:
                outputs += time.outputs
                time.outputs = []
            windows, timers = keeper.windows, keeper.timers
            due = due_times(clock, windows, timers)
            if due[0] <= clock.time or due[1] <= clock.wall:  # (as ``settle``)
                outputs += keeper.fire(batch, time)
                due = due_times(clock, windows, timers)
            encoded = self._encode(outputs, key, origin, adder) if outputs else []
            keeper.save_last(batch, time, due)
            return encoded
        except LateError as late:
            del self.letters[letters_before:]
            raise RecordFailedError("late", str(late), late) from late
        except (ProcessorStoppedError, RecordFailedError):
            del self.letters[letters_before:]
            raise
        except Exception as error:  # any failure of user code is handled by the policy
            del self.letters[letters_before:]
            raise RecordFailedError(
                "processor", describe_error(error, with_trace=True), error
            ) from error

    def _event_time(self, record: Record[Any]) -> int:
        source = self._event_times.get(record.topic) or self._event_times["*"]
        try:
            return source(record)
        except NoEventTimeError as error:  # (what an event time function raises: on_error's)
            raise RecordFailedError("decode", f"no event time: {error}", error) from None

    # -- a tick -----------------------------------------------------------------------------

    def tick(
        self,
        batch: StateBatch,
        where: tuple[str, int, int],
        keys: Sequence[bytes],
        floor: int,
        wall: int,
        *,
        running: Callable[[bytes, DueItem], None] | None = None,
        refused: Mapping[tuple[bytes, DueItem], str] | None = None,
    ) -> list[EncodedOutput]:
        """Apply the tick at ``where`` to ``keys`` (those living in its partition there that
        have something due: the caller chose them) and encode what fired; ``running`` is
        told each key and item before it fires, the items of ``refused`` are dropped as
        failed (``TimeKeeper.tick``)."""
        self._origin = where
        self._ticking = True
        try:
            outputs = self.keeper.tick(batch, keys, floor, wall, running=running, refused=refused)
        finally:
            self._ticking = False
        encoded: list[EncodedOutput] = []
        for output in outputs:
            key = output.key if output.key is not None else b""
            encoded += self._encode(output, key, where, self.tick)
        return encoded

    def _passed_over(self, key: bytes, raw: bytes, why: str) -> None:
        """A key a tick passed over, its time record damaged: a dead letter (stage
        ``decode``) at the tick, holding the record."""
        topic, partition, offset = self._origin
        reason = damaged_reason(
            key,
            why,
            "The tick was not applied to the key, and no later tick is until it is repaired "
            "(this dead letter's value is the record as stored)",
        )
        self.letters.append(DeadLetter(topic, partition, offset, key, raw, (), "decode", reason))

    # -- state views ------------------------------------------------------------------------

    def state(self, batch: StateBatch, key: bytes, time: KeyTime, stores: Sequence[str]) -> Any:
        """What a function with ``stores`` gets for ``key``: one view, or a dict by name."""
        views = {name: self._view(batch, key, time, name) for name in stores}
        return next(iter(views.values())) if len(views) == 1 else views

    def _view(self, batch: StateBatch, key: bytes, time: KeyTime, name: str) -> Any:
        app = self.app
        if name in app.tables:
            return self._tables.view(batch, name, key, lambda: time.event_time)
        if name in app.windows:
            return KeyWindows(time, app.windows[name])
        if name in app.timers:
            return KeyTimers(time, name)
        state = batch.store(name).key(key)
        if name in app.ttls:
            return ExpiringState(state, time, app.ttls[name])
        return state

    # -- timers -----------------------------------------------------------------------------

    def _run_timer(self, spec: TimerSpec, timer: Timer, batch: StateBatch) -> list[Output]:
        return self._timer(spec, timer, batch, None)

    def _refuse_timer(
        self, spec: TimerSpec, timer: Timer, batch: StateBatch, why: str
    ) -> list[Output]:
        return self._timer(spec, timer, batch, why)

    def _timer(
        self, spec: TimerSpec, timer: Timer, batch: StateBatch, refused: str | None
    ) -> list[Output]:
        """Run a timer's function (or, ``refused``, drop it as failed), handling failures."""
        key = timer.key
        saved = self._savepoints(batch, key)
        time = self.keeper.open(batch, key)
        time.ticked = self._ticking
        stores = spec.stores or tuple(self.app.stores)
        before = len(time.dead)
        try:
            if refused is not None:
                raise _RefusedError(refused)
            result = spec.function(timer, self.state(batch, key, time, stores))
            dead = time.dead[before:]  # (parts of its work it made dead letters)
            if dead and self.stop_on_error:
                raise _RefusedError(dead[0][1])
            outputs = [] if result is None else list(output_items(result, spec.function.__name__))
            outputs += time.outputs
            _check_progress(timer, time.clock.timers.get(spec.name, {}).get(timer.name))
            for output in outputs:
                if output.key is None:
                    output.key = key
            self._encode(outputs, key, self._origin, spec.function)  # (what it cannot write)
            self.keeper.save(batch, time, self.app.windows, self.app.timers)
            named = f"timer {timer.name!r} of store {timer.store!r}, key {key!r}"
            for value, failed in dead:
                why = f"{named}: {failed}. That part was dropped; the rest the timer did is kept"
                letter = DeadLetter(*self._origin, key, value, (), "timer", why)
                self.letters.append(letter)
            return outputs
        except Exception as error:  # any failure of user code is handled by the policy
            self._undo(batch, key, saved, len(self.letters))
            topic, partition, offset = self._origin
            refusal = isinstance(error, (_RefusedError, RecordFailedError))
            why = str(error) if refusal else describe_error(error, with_trace=True)
            reason = (
                f"timer {timer.name!r} of store {timer.store!r} (due {timer.time} ms) failed "
                f"for key {key!r}: {why}. The timer was dropped and its writes undone."
            )
            decode = isinstance(error, RecordFailedError) and error.stage == "decode"
            stage: DeadLetterStage = "decode" if decode else "timer"
            del time.dead[before:]
            if self.stop_on_error:
                raise ProcessorStoppedError(
                    f"{reason} Fix the timer function, then restart; or set on_error: "
                    "dead-letter to skip such timers.",
                    at=self._origin,
                ) from error
            value = orjson.dumps({"store": timer.store, "timer": timer.name, "due": timer.time})
            self.letters.append(DeadLetter(topic, partition, offset, key, value, (), stage, reason))
            return []

    # -- windows that close -----------------------------------------------------------------

    def _refuse_close(  # noqa: PLR0917 - a window that closed, as _close has it
        self, spec: WindowSpec, key: bytes, start: int, end: int, acc: Any, why: str
    ) -> list[Output]:
        return self._close(spec, key, start, end, acc, refused=why)

    def _close(  # noqa: PLR0917 - a window that closed
        self,
        spec: WindowSpec,
        key: bytes,
        start: int,
        end: int,
        acc: Any,
        refused: str | None = None,
    ) -> list[Output]:
        """The output of a window that closed; if its result (the aggregation's ``merge`` of a
        sliding window's points, its or the store's ``result``) fails or cannot be written, a
        dead letter (stage ``window``) holding its accumulator (or those points) instead, as
        when it is ``refused`` (why: its result is not run)."""
        try:
            if refused is not None:
                raise _RefusedError(refused)
            acc = accumulator(acc)  # (a sliding window's points merged: the app's merge)
            # encoded here, so that a value that cannot be written is this window's dead
            # letter (the output topic is one App.check found declared)
            value = encode_value(spec.output_of(key, start, end, acc))
            return [Output(value, key=key, topic=spec.to)]
        except Exception as error:  # any failure of user code is handled by the policy
            refusal = isinstance(error, _RefusedError)
            why = str(error) if refusal else describe_error(error, with_trace=True)
            letter = window_letter(spec, key, start, end, acc, why, self._origin)
            if self.stop_on_error:
                raise ProcessorStoppedError(
                    f"{letter.reason} Fix the window's result, then restart; or set on_error: "
                    "dead-letter to skip such windows.",
                    at=self._origin,
                ) from error
            self.letters.append(letter)
            return []

    # -- undoing ----------------------------------------------------------------------------

    def _savepoints(self, batch: StateBatch, key: bytes) -> list[tuple[str, Any]]:
        return [(name, batch.store(name).savepoint(key)) for name in self._stores]

    def _undo(
        self, batch: StateBatch, key: bytes, saved: list[tuple[str, Any]], letters: int
    ) -> None:
        for name, before in saved:
            batch.store(name).rollback(key, before)
        del self.letters[letters:]


def _check_progress(timer: Timer, now: tuple[int, str] | None) -> None:
    """Refuse a timer that set itself due again no later than it fired: it would fire again
    at once, and again, forever."""
    if now is not None and now[1] == timer.kind and now[0] <= timer.time:
        raise _RefusedError(
            f"it set itself due again at {now[0]} ms, not after the {timer.time} ms it fired "
            "at: it would fire again at once, forever. Fix: set it later than timer.time "
            "(e.g. timer.time + a period), or cancel it"
        )
