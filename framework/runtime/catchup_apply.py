"""Putting state into a receiver's catch-up: one step's records, applied in restore mode (the
gained keys' records, and the ticks among them applied to the gained keys only, under the
catch-up's own crash guard: a record that killed the receiver ``crash_limit`` times alone is
skipped, as the old owner's loop skips it), or a bulk build of them (Spark, or the sources'
snapshots)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from framework.bootstrap.child_process import BootstrapRun
from framework.input_times import ORDER_SCOPE
from framework.kafka import ConsumerFailedError, Message, OffsetResetError
from framework.processing import ProcessorStoppedError, RecordProcessor
from framework.runtime.crashes import CrashGuard
from framework.runtime.tick_guard import guarded_tick, lone_ticks
from framework.snapshots.source_starts import mark_scope
from framework.time.applying import FLOOR_SCOPE
from framework.time.ticks import is_tick_message
from rebalance import bucket, key_hash
from rebalance.control import Handoff
from rebalance.key_ranges import KeyRange
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateBatch
from statestore.layout import flag_key

__all__ = [
    "Applies",
    "BulkBuild",
    "SparkBuild",
    "Taken",
    "apply_taken",
    "cannot_read_on",
    "check_not_past",
    "clear_stale",
    "gained_from",
    "history_lost",
    "progress_writer",
    "took_over",
]

log = logging.getLogger(__name__)

#: keys whose source a catch-up remembers (then it starts over)
_KNOWN_KEYS = 100_000
#: a record read: the message, its position, its offset, and whether it applies here (a
#: gained key's record, or a tick: ``Applies.record``)
Taken = tuple[Message, Position, int, bool]


class Applies:
    """What of a catch-up's reading applies here: a record of a key gained from source ``s``
    (``gained_from``) at or past where ``s``'s snapshot covers its partition (``starts``:
    position -> source -> offset, 0 when absent; set again once a bulk build is in); and a
    tick of an app with ``time``, to those keys only (``keys_at``: never to the receiver's
    own keys, nor to a gained key whose snapshot already holds the tick's effect)."""

    def __init__(
        self,
        gained_from: Callable[[bytes], int | None],
        starts: Mapping[Position, Mapping[int, int]],
        *,
        time: bool,
    ) -> None:
        self._gained_from = gained_from
        self.starts = starts
        self._time = time

    def key(self, key: bytes, position: Position, offset: int) -> bool:
        """Whether a record of ``key`` at ``position`` and ``offset`` applies here."""
        source = self._gained_from(key)
        return source is not None and offset >= self.starts.get(position, {}).get(source, 0)

    def record(self, message: Message, position: Position, offset: int) -> bool:
        """Whether ``message`` (at ``position`` and ``offset``) applies here: a gained key's
        record, or a tick (to ``keys_at``)."""
        if self._time and is_tick_message(position[0], message):  # (a compacted topic's: keyed)
            return True
        key = message.key()
        return key is not None and self.key(key, position, offset)

    def keys_at(self, position: Position, offset: int) -> Callable[[bytes], bool]:
        """The keys a tick at ``position`` and ``offset`` applies to here."""
        return lambda key: self.key(key, position, offset)


def apply_taken(
    taken: list[Taken],
    *,
    database: ProcessorDatabase,
    records: RecordProcessor,
    guard: CrashGuard,
    write: Callable[[StateBatch], None],
    applies: Applies,
) -> int:
    """Run the function on the records of ``taken`` that apply here (a tick: to the keys
    ``applies`` gives), in their order, and commit them with the catch-up's progress (which
    ``write`` writes into the batch); returns how many were applied."""
    careful = bool(guard.suspects)
    ranges: dict[Position, list[int]] = {}
    for _message, position, offset, gained in taken:
        if gained:
            ranges.setdefault(position, [offset, offset])[1] = offset
    # judged by a registry view at least as new as each record, as the live loop judges them
    # (``RecordProcessor.confirm_markers``): a record placed after a shrink or a growth this
    # processor's view lacks would be taken for a late one and skipped
    records.confirm_markers([message for message, _position, _offset, gained in taken if gained])
    if ranges:  # a death from here on counts against these records
        lone = lone_ticks(((m, *p, o) for m, p, o, gained in taken if gained), ranges)
        guard.attempt(ranges, lone if records.timing is not None else ())
    _restore_floors(records, database)
    batch = database.begin()
    applied = 0
    try:
        for message, (topic, partition), offset, gained in taken:
            if gained:
                where = (topic, partition, offset)
                applied += _apply(batch, message, where, records, guard, careful, applies)
    except ProcessorStoppedError:
        guard.survived()  # a stop by policy is no crash: a restart tries the record again
        raise
    if ranges:
        guard.survived()
    write(batch)
    batch.commit()
    return applied


def progress_writer(scope: str, moved: Mapping[Position, int]) -> Callable[[StateBatch], None]:
    """What writes a catch-up's progress ``moved`` (read as they came) into ``scope``."""

    def write(batch: StateBatch) -> None:
        for (topic, partition), next_offset in moved.items():
            batch.set_progress(scope, topic, partition, next_offset)

    return write


def _apply(  # noqa: PLR0917 - one record of apply_taken's
    batch: StateBatch,
    message: Message,
    where: tuple[str, int, int],
    records: RecordProcessor,
    guard: CrashGuard,
    careful: bool,
    applies: Applies,
) -> int:
    """Apply one record that applies here (skipped after crashes: 0, else 1)."""
    topic, partition, offset = where
    if careful and guard.crashes(topic, partition, offset) >= guard.limit:
        if records.stop_on_error:
            raise ProcessorStoppedError(
                f"{topic}[{partition}]@{offset} (key {message.key()!r}) killed this "
                f"processor {guard.crashes(topic, partition, offset)} times while it "
                "caught up; with on_error: stop it is not skipped (its state change would "
                "be missing here, while the old owner applied it). Fix the function or "
                "the record and restart, or abort the scale.",
                at=where,
            )
        guard.skip(batch, message, where, "", restore=True)
        return 0
    if message.key() is None or is_tick_message(topic, message):
        # a tick: to the gained keys living there only (item by item while suspects remain:
        # one may kill the process, as it killed the old owner)
        keys = applies.keys_at((topic, partition), offset)
        if careful:
            guarded_tick(guard, records, batch, message, where, restore=True, keys=keys)
        else:
            records.process(batch, message, restore=True, keys=keys)
        return 1
    records.process(batch, message, restore=True)
    return 1


def _restore_floors(records: RecordProcessor, database: ProcessorDatabase) -> None:
    """Let ``records`` know the floors ``database`` holds before it reads (the loop's tick
    writer may not have told it yet): a floor it raises is written, never a lower one."""
    timing = records.timing
    if timing is not None and not timing.floors_restored:
        timing.restore_floors(database.progress(FLOOR_SCOPE))


def clear_stale(
    database: ProcessorDatabase, scope: str, initial: int, gained: list[KeyRange]
) -> None:
    """Delete whatever state ``database`` holds for the gained keys (their ranges), with the
    flag saying it did, once per catch-up (``scope``)."""
    flag = f"{scope}-cleared"
    if not database.has_flag(flag):
        database.delete_ranges(initial, gained, [(flag_key(flag), b"1")])


def gained_from(
    initial: int, old: int, new: int, processor: int, sources: Collection[int]
) -> Callable[[bytes], int | None]:
    """The source a key is gained from by ``processor`` in a scale from ``old`` to ``new``
    processors (``None``: not gained, or not from one of ``sources``)."""

    known: dict[bytes, int | None] = {}  # keys repeat: each is placed once (up to a bound)

    def source_of(key: bytes) -> int | None:
        if key in known:
            return known[key]
        h = key_hash(key)
        source = bucket(h, initial, old) if bucket(h, initial, new) == processor else None
        if len(known) >= _KNOWN_KEYS:
            known.clear()
        known[key] = source if source in sources else None
        return known[key]

    return source_of


def took_over(
    processor: int, handoff: Handoff, replayed: int, seconds: float, bulk: int, *, bootstrap: str
) -> str:
    """The log line of ``processor`` completing ``handoff``, having read ``replayed`` records
    in the ``seconds`` its catch-up ran, after a bulk build (``bootstrap`` in the config) that
    counted ``bulk``: keys taken from snapshots, or records Spark folded."""
    seconds = max(seconds, 1e-9)
    before = ""
    if bulk and bootstrap == "snapshot":
        before = f"; before that it took {bulk:,} keys from its sources' snapshots"
    elif bulk and bootstrap == "spark":
        before = f"; before that Spark folded {bulk:,} records"
    return (
        f"processor {processor} took over {sorted(handoff.partitions)} from processor "
        f"{handoff.source} at {dict(handoff.released)}; replayed {replayed} records in "
        f"{seconds:.1f}s ({replayed / seconds:.0f}/s){before}"
    )


def cannot_read_on(
    processor: int, generation: int, error: OffsetResetError | ConsumerFailedError
) -> ProcessorStoppedError:
    """The stop of a catch-up whose consumer cannot read on: records retention deleted
    before it read them, or a consumer that failed for good."""
    if isinstance(error, OffsetResetError):
        return history_lost(processor, generation, error.reason)
    return ProcessorStoppedError(
        f"processor {processor}'s catch-up for generation {generation} cannot read on: "
        f"{error}. Fix the cause (see Kafka's message), then restart the processor and "
        "resume the scale, or abort it."
    )


def history_lost(processor: int, generation: int, reason: str) -> ProcessorStoppedError:
    """The stop of a catch-up whose records retention deleted before it read them."""
    return ProcessorStoppedError(
        f"processor {processor} cannot rebuild the keys it gains in generation {generation}: "
        f"retention deleted records it had not read yet ({reason}). Building state from "
        "partial history would be wrong, so it stops catching up. Fix: abort the scale "
        "(`splitstate scale MODULE:APP --abort`) and keep the inputs' history "
        "(retention.ms=-1), or bootstrap from an archive (spark.archive)."
    )


def check_not_past(
    processor: int,
    generation: int,
    positions: Mapping[Position, int],
    released: Mapping[Position, int],
    *,
    at_least_once: bool = False,
) -> dict[Position, int]:
    """Where to take over partitions released at ``released`` (F): at F, unless one was
    already rebuilt past F (T2 > F).

    The protocol never lets that happen on its own (T2 <= T1 <= F; a snapshot's offsets are
    committed to the group before it is taken). Under at-least-once two runs of the old
    owner may both commit for a while (a mistaken second copy, until it reads the newer
    run's instance record), so the group's offset the receiver read (T1 >= T2) can be above
    the F the newer run releases at: every record below T2 was below a group commit, so its
    outputs were emitted, and the receiver takes over at T2 (said in a warning). Otherwise
    (exactly-once fences the older run) it means a bug or an edited consumer-group offset:
    ``ProcessorStoppedError``, and a person must look."""
    past = {p: f for p, f in released.items() if p in positions and positions[p] > f}
    if past and at_least_once:
        log.warning(
            "processor %d, generation %d: partitions released below what it rebuilt: %s. "
            "Under at-least-once another run of the old owner committed past F before it "
            "stopped (their outputs were emitted): it takes them over where it rebuilt to",
            processor,
            generation,
            {p: (f, positions[p]) for p, f in past.items()},
        )
        return {**released, **{p: positions[p] for p in past}}
    if past:
        where = ", ".join(
            f"{t}[{p}] at {f} (rebuilt to {positions[(t, p)]})" for (t, p), f in past.items()
        )
        raise ProcessorStoppedError(
            f"protocol error in generation {generation}: partitions were released at offsets "
            f"F below what processor {processor} already rebuilt (T2 > F): {where}. It stops "
            "rather than take them over with state ahead of what was emitted; until this is "
            "resolved they are not processed. It means a bug or an edited consumer-group "
            "offset: report it with this log."
        )
    return dict(released)


class BulkBuild(Protocol):
    """Builds a catch-up's gained keys in bulk before it reads (Spark, or the sources'
    snapshots): ``poll`` does a step and, once the state is in (ingested, the catch-up's
    progress and loaded flag written), returns how many records or keys it covered."""

    #: whether ``poll`` waits half a second between calls (a job polled from outside)
    polled_every: bool

    def poll(self) -> int | None:
        """One step; the count once finished, else ``None``."""
        ...

    def describe(self) -> str:
        """What it does, for the log."""
        ...

    def cancel(self) -> None:
        """Stop it; nothing already ingested is undone."""
        ...


class SparkBuild:
    """A Spark bootstrap job building processor ``processor``'s gained keys, ingested once
    it finished (progress in ``scope``, the marks there in ``mark_scope(scope)``, then
    ``flag`` set)."""

    polled_every = True

    def __init__(
        self, run: BootstrapRun, database: ProcessorDatabase, processor: int, scope: str, flag: str
    ) -> None:
        self.run = run
        self._database = database
        self._processor = processor
        self._scope = scope
        self._flag = flag

    def describe(self) -> str:
        """The job's directory."""
        return f"Spark, in {self.run.directory}"

    def cancel(self) -> None:
        """Cancel the job."""
        self.run.cancel()

    def poll(self) -> int | None:
        """Ingest the job's files once it finished; returns the records it folded."""
        manifest = self.run.poll()
        if manifest is None:
            return None
        database, processor = self._database, self._processor
        target = manifest.targets[processor]
        # its marks at the offsets it built to (a canonical app's) are the catch-up's there;
        # its growth bases are kept as a backfill's are
        progress = dict(target.progress() or {})
        marks = progress.pop(ORDER_SCOPE, None)
        if marks:
            progress[mark_scope(self._scope)] = marks
        files = manifest.files(processor)
        database.bulk_load(files, target.offsets, scope=self._scope, progress=progress or None)
        batch = database.begin()
        batch.set_flag(self._flag)
        batch.commit()
        log.info(
            "processor %d: ingested the Spark bootstrap: %d keys from %d records; catching up "
            "from %s",
            processor,
            target.keys,
            manifest.records_read,
            target.offsets,
        )
        shutil.rmtree(self.run.directory, ignore_errors=True)
        return manifest.records_read
