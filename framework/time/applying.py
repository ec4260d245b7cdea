"""A record or a tick of an app that keeps time, as ``RecordProcessor.process`` ends it:
outputs, or a dead letter (``late``, ``decode``, ``processor``; ``timer`` ones apart)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from framework.errors import ProcessorStoppedError, describe_error
from framework.records import DeadLetter, DeadLetterStage, EncodedOutput, InputMessage, Record
from framework.time.due_items import DueItem
from framework.time.running import RecordFailedError, TimedFunctions
from framework.time.ticks import read_tick
from statestore import StateBatch

__all__ = ["FLOOR_SCOPE", "TimeApplier"]

#: where a processor's state keeps each input partition's floor as read (``TimeApplier.floors``;
#: ``StateBatch.set_progress``): written with the batch that read it, so a restart knows it
FLOOR_SCOPE = "time-floor"

#: ``(message, where, stage, reason, restore) -> dead letter`` (``RecordProcessor._dead``)
MakeDead = Callable[[InputMessage, tuple[str, int, int], DeadLetterStage, str, bool], Any]
_STAGES: dict[str, DeadLetterStage] = {"late": "late", "decode": "decode"}


class TickHomes(Protocol):
    """Which keys a tick applies to (``PlacementCheck``'s)."""

    def lives_at(self, key: bytes, where: tuple[str, int, int], steps: int | None, /) -> bool:
        """Whether a tick at ``where`` whose writer knew ``steps`` history steps applies to
        ``key``."""

    def unknown_steps(self, where: tuple[str, int, int], steps: int | None, /) -> str | None:
        """Why a tick at ``where`` naming ``steps`` cannot be judged (``None``: it can)."""

    def stale_tick(self, where: tuple[str, int, int], steps: int | None, /) -> bool:
        """Whether judging a tick at ``where`` naming ``steps`` needs a newer registry view."""


class TimeApplier:
    """Applies records and ticks with ``functions``; ``homes`` says which keys a tick applies
    to (``PlacementCheck``: by the history steps its writer knew). Only the ticks of app
    ``app_id`` (and those that name no app) are applied: another app's is passed over.

    It notes what it read of each input partition's time (what a processor decides its
    ticks from, ``framework.runtime.ticking``): ``floors``, the largest event time of its
    records and floor of its ticks applied here, each rise also written in the batch that
    read it (``FLOOR_SCOPE``), so that once ``restore_floors`` took the state's, a restart
    knows what committed batches read (none of a partition until one is);
    ``records``, how many of its keyed records came to their key's time; ``ticks``, how
    many ticks were read."""

    def __init__(
        self,
        functions: TimedFunctions,
        dead: MakeDead,
        homes: TickHomes,
        app_id: str,
    ) -> None:
        self.functions = functions
        self.app_id = app_id
        self._dead = dead
        self._homes = homes
        self._letters: list[DeadLetter] = []
        self._guard: tuple[
            Callable[[bytes, DueItem], None] | None, Mapping[tuple[bytes, DueItem], str] | None
        ] = (None, None)
        self.floors: dict[tuple[str, int], int] = {}
        #: whether ``restore_floors`` took the state's floors (a reader with a durable state
        #: does, before it reads: a rise noted from less would write a lower floor back)
        self.floors_restored = False
        self.records: dict[tuple[str, int], int] = {}
        self.ticks = 0
        #: inputs whose keys keep no time: a ``group_by``'s sources (their ticks apply to no
        #: key, not to the new keys living at the same partition of the internal topic)
        self._timeless = {spec.source for spec in functions.app.repartitions.values()}

    def record(  # noqa: PLR0917 - the record, as process() has it
        self,
        batch: StateBatch,
        message: InputMessage,
        where: tuple[str, int, int],
        value: Any,
        function: Callable[..., Any],
        stores: Sequence[str],
        restore: bool,
    ) -> tuple[list[EncodedOutput], DeadLetter | None]:
        """A decoded keyed record at ``where``, run through its key's time."""
        topic, partition, offset = where
        key = message.key()
        assert key is not None
        record = Record(topic, partition, offset, key, value, message=message)
        try:
            outputs = self.functions.record(batch, record, function, stores)
        except RecordFailedError as failed:
            self._read(batch, (topic, partition), self.functions.event_time)
            self._take(restore)
            if failed.stage == "processor" and self.functions.stop_on_error:
                raise ProcessorStoppedError(
                    f"the processor function failed on {topic}[{partition}]@{offset} "
                    f"(key {key!r}): {describe_error(failed.cause)}. The record was not "
                    "processed and state is at the batch before it. Fix the function or the "
                    "record, then restart; or set on_error: dead-letter to skip such records.",
                    at=where,
                ) from failed.cause
            stage = _STAGES.get(failed.stage, "processor")
            return [], self._dead(message, where, stage, failed.reason, restore)
        self._read(batch, (topic, partition), self.functions.event_time)
        self._take(restore)
        return ([] if restore else outputs), None

    def tick(
        self,
        batch: StateBatch,
        message: InputMessage,
        where: tuple[str, int, int],
        headers: Sequence[tuple[str, bytes | None]],
        *,
        restore: bool,
        keys: Callable[[bytes], bool] | None,
    ) -> tuple[list[EncodedOutput], DeadLetter | None]:
        """A tick at ``where``: applied to the keys living there (by the history steps its
        writer knew) that have something due by it (and that ``keys`` accepts, when given);
        another app's tick changes nothing here, not even the partition's floor as read
        (``floors``)."""
        read = read_tick(headers)
        if isinstance(read, str):
            return [], self._dead(message, where, "decode", f"not a tick: {read}", restore)
        if not read.applies_to(self.app_id):
            return [], None  # another app's: as a record of no key of this app's
        floor, wall, steps = read.floor, read.wall, read.steps
        unknown = self._homes.unknown_steps(where, steps)
        if unknown is not None:
            return [], self._dead(message, where, "placement", f"a tick {unknown}", restore)
        self.ticks += 1
        self._read(batch, where[:2], floor, record=False)
        lives_at = self._homes.lives_at
        chosen = [
            key
            for key in ([] if where[0] in self._timeless else batch.due_keys(floor, wall))
            if lives_at(key, where, steps) and (keys is None or keys(key))
        ]
        running, refused = self._guard
        outputs = (
            self.functions.tick(batch, where, chosen, floor, wall, running=running, refused=refused)
            if chosen
            else []
        )
        self._take(restore)
        return ([] if restore else outputs), None

    def stale(
        self, where: tuple[str, int, int], headers: Sequence[tuple[str, bytes | None]]
    ) -> bool:
        """Whether judging the tick at ``where`` (with ``headers``) needs a newer view of the
        registry (``PlacementCheck.stale_tick``); never a malformed one (a dead letter
        whatever the registry says) nor another app's (passed over)."""
        read = read_tick(headers)
        if isinstance(read, str) or not read.applies_to(self.app_id):
            return False
        return self._homes.stale_tick(where, read.steps)

    @contextmanager
    def guarding(
        self,
        running: Callable[[bytes, DueItem], None] | None,
        refused: Mapping[tuple[bytes, DueItem], str] | None = None,
    ) -> Iterator[None]:
        """While in it, a tick tells ``running`` each key and due item before it fires (a
        crash guard notes what a death interrupts), and drops those of ``refused`` (key and
        item -> why) as failed, their function not run (``framework.runtime.tick_guard``)."""
        self._guard = running, refused
        try:
            yield
        finally:
            self._guard = None, None

    def take_letters(self) -> list[DeadLetter]:
        """The dead letters of timers that failed (stage ``timer``) since the last call."""
        letters, self._letters = self._letters, []
        return letters

    def restore_floors(
        self, stored: Mapping[tuple[str, int], int], *, replace: bool = False
    ) -> None:
        """Take the floors the state holds (``FLOOR_SCOPE``: what committed batches read):
        each partition's the larger of those and what was read since, or, ``replace``,
        exactly those (the batches read since were dropped)."""
        if replace:
            self.floors = dict(stored)
        else:
            for position, floor in stored.items():
                if floor > self.floors.get(position, floor - 1):
                    self.floors[position] = floor
        self.floors_restored = True

    def _read(
        self,
        batch: StateBatch,
        position: tuple[str, int],
        time: int | None,
        *,
        record: bool = True,
    ) -> None:
        """Note a keyed record (``record``) or a tick of ``position`` with event time (or
        floor) ``time``; a rise of its floor is written with ``batch``."""
        if record:
            self.records[position] = self.records.get(position, 0) + 1
        if time is not None and time > self.floors.get(position, time - 1):
            self.floors[position] = time
            batch.set_progress(FLOOR_SCOPE, position[0], position[1], time)

    def _take(self, restore: bool) -> None:
        letters = self.functions.letters
        if letters:  # (per record: most leave none)
            if not restore:
                self._letters += letters
            self.functions.letters = []
