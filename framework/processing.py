"""Applying the app's processor functions to raw records, one record at a time.

Shared by the runtime and the test driver: decode and validate the value, give the function
the key's state, collect its outputs, and turn anything that goes wrong into a dead letter
(or, with ``on_error: stop``, a ``ProcessorStoppedError`` naming the record). A failed record's
state writes are rolled back; nothing it did survives. A keyed record that is not where linear
hashing places its key -- by its ``splitstate.count`` header's count, or without the header by
any count in the topic's history -- is dead-lettered before anything runs (``placement``, see
``framework.growth.placement``); so every path that folds records (the live loop, restore
mode, a catch-up, the Spark fold) skips the same ones. Before that check, a compaction
tombstone (``framework.growth.compaction``) is skipped: no state change, no output, no dead
letter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from framework.app import App
from framework.coordination.registry import Growth, TopicEntry
from framework.errors import (
    ProcessorFencedError,
    ProcessorReplacedError,
    ProcessorStoppedError,
    SplitstateError,
    describe_error,
)
from framework.growth.compaction import compaction_refusal, has_compaction_header
from framework.growth.markers import is_marker_record
from framework.growth.placement_check import MarkerFinder, PlacementCheck, RegistryView
from framework.joins import TableRecords
from framework.kafka import KafkaIOError
from framework.output_encoding import OutputEncoder
from framework.records import (
    DeadLetter,
    DeadLetterStage,
    EncodedOutput,
    InputMessage,
    Record,
    StoredMessage,
    encode_input,
    encode_value,
    readable_headers,
)
from framework.repartition import written_topics
from framework.routes import Route
from framework.tables import UnreadableRecordError
from framework.time.applying import TimeApplier
from framework.time.running import TimedFunctions
from framework.time.ticks import is_tick_record, read_tick
from rebalance import TopicHistory
from statestore import StateBatch

__all__ = [
    "DeadLetter",
    "EncodedOutput",
    "InputMessage",
    "ProcessorFencedError",
    "ProcessorReplacedError",
    "ProcessorStoppedError",
    "RecordProcessor",
    "StoredMessage",
    "encode_input",
    "encode_value",
]


#: why a record whose headers cannot be read (``readable_headers``) is a dead letter
UNREADABLE_REASON = (
    "its headers cannot be read: a header name is not UTF-8 text (confluent-kafka cannot "
    "decode it; Java clients and Spark read it with U+FFFD replacement characters, so a name "
    "holding U+FFFD counts the same). The record was not processed; this dead letter holds its "
    "key and value, not its headers. Fix: write header names as UTF-8 text, then send the "
    "record again."
)


class RecordProcessor:
    """Runs the app's processor functions over raw records within a state batch.

    ``initial_partitions``: each input topic's initial partition count ``N`` (the topic
    registry's); a keyed record of such a topic must sit on a partition where linear hashing
    places its key (topics it lacks are not checked): the one its ``splitstate.count`` header's
    count places it on, or without the header one that any count of the topic's history does.
    ``histories``: each input topic's partition history (the topic registry's, kept current
    with ``adopt``; just ``N`` for a topic without one); with the markers met in the input,
    they say where each key lives at each offset (a record elsewhere is late, a dead letter:
    ``framework.growth.late``). ``unfenced``/``unplaced``: how many records without that
    header this processor processed/dead-lettered before (``database.progress``);
    ``placement`` keeps both up to date in the batches.

    A marker counts only if the registry records its step (``growths``: the input topics'
    changes in progress, with ``histories``); any other record that claims to be one is a
    dead letter (stage ``placement``, ``unrecorded marker: ...``). ``registry`` reads the
    registry's entries now; given, ``confirm_markers`` reads them again before records its
    view may be older than, so a step recorded after the view was read is never missed.
    ``find_marker`` finds a change's markers this run did not read (``PlacementCheck``).
    ``stop_on_error``: whether a failure of the app's code (its function, a timer, a window's
    result) raises ``ProcessorStoppedError`` instead of being a dead letter (default: the
    config's ``on_error``)."""

    def __init__(
        self,
        app: App,
        initial_partitions: Mapping[str, int] | None = None,
        unfenced: Mapping[tuple[str, int], int] | None = None,
        histories: Mapping[str, TopicHistory] | None = None,
        *,
        unplaced: Mapping[tuple[str, int], int] | None = None,
        growths: Mapping[str, Growth] | None = None,
        registry: Callable[[], RegistryView] | None = None,
        find_marker: MarkerFinder | None = None,
        stop_on_error: bool | None = None,
    ) -> None:
        self.app = app
        self.placement = PlacementCheck(  # (it counts the records without the count header)
            initial_partitions or {},
            histories or {},
            unfenced or {},
            unplaced or {},
            growths,
            find_marker=find_marker,
        )
        self._registry = registry
        stop = app.config.on_error == "stop"
        self.stop_on_error = stop if stop_on_error is None else stop_on_error
        self.outputs = written_topics(app)  # (its outputs and its group_by's internal topics)
        self.default_output = app.config.outputs[0].topic if len(app.config.outputs) == 1 else None
        self._encode = OutputEncoder(self.outputs, self.default_output).encode
        self._time = (
            TimeApplier(
                TimedFunctions(app, self._encode, self.stop_on_error),
                self._dead,
                self.placement,
                app.config.app_id,
            )
            if app.uses_time
            else None
        )
        self._table_records = TableRecords(
            app.tables, app.table_joins, self._encode, self.stop_on_error
        )
        self._tables = self._table_records.tables
        self._routes: dict[str, Route] = {}
        for spec in app.config.inputs:
            handler = app.handler(spec.topic)
            self._routes[spec.topic] = Route(
                spec.topic, handler, handler.stores or tuple(app.stores), app.tables
            )
        self.dead_letter_count = 0

    def recount(
        self,
        unfenced: Mapping[tuple[str, int], int],
        unplaced: Mapping[tuple[str, int], int] | None = None,
    ) -> None:
        """Count from ``unfenced`` and ``unplaced`` again (the state's, after uncommitted
        batches were dropped)."""
        self.placement.recount(unfenced, unplaced or {})

    def adopt(
        self, histories: Mapping[str, TopicHistory], growths: Mapping[str, Growth] | None = None
    ) -> None:
        """Take the input topics' current histories (a growth recorded its count, then its
        thresholds) and growths in progress."""
        self.placement.adopt(histories, growths)

    def confirm_markers(self, messages: Iterable[InputMessage]) -> dict[str, TopicEntry] | None:
        """Before ``messages`` are processed: if the registry as last read may be older than
        one of them (``_stale``), read it again (once; with ``registry`` only) and adopt it;
        returns the input topics' entries read (``None``: not read); then the markers this run
        did not read are searched (``PlacementCheck.search_markers``). A ``KafkaIOError`` when
        either cannot be read (a record is never judged by a view older than itself)."""
        if self._registry is None:
            return None
        batch = [m for m in messages if m.topic() in self._routes]
        found = None
        for message in batch:
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic is None or partition is None or offset is None:
                continue
            if not self._stale(message, (topic, partition, offset)):
                continue
            try:
                entries = self._registry()
            except KafkaIOError as error:
                what = "tick or marker" if message.key() is None else "record"
                raise KafkaIOError(
                    f"could not read the topic registry to check the {what} at "
                    f"{topic}[{partition}]@{offset} against it: {error}. It is not judged by "
                    "an older view of the registry: the processor exits, to read it again "
                    "when restarted. Fix: make Kafka reachable."
                ) from None
            found = self.placement.confirm(entries, batch)
            break
        self.placement.search_markers(batch)  # (after any read: by the view it adopted)
        return found

    def _stale(self, message: InputMessage, where: tuple[str, int, int]) -> bool:
        """Whether ``message`` at ``where`` needs a newer view of the registry: a marker it
        does not record, a tick naming steps it lacks (``TimeApplier.stale``), or a keyed
        record whose key lives elsewhere by it (a step the view lacks, or a late record);
        never a compaction tombstone (it sits in a key's earlier partition by design)."""
        topic, key = where[0], message.key()
        if key is None or key.startswith(self._routes[topic].prefix):  # (a marker's: its id)
            headers = readable_headers(message)
            if headers is not None and is_marker_record(topic, key, headers):
                return self.placement.stale_marker(where, headers)
            if headers is not None and is_tick_record(topic, key, headers):
                return self._time is not None and self._time.stale(where, headers)
            if key is None:
                return False  # no marker, no tick: a dead letter, whatever the registry says
        if not self.placement.stale_key(where, key):
            return False
        headers = readable_headers(message)
        return headers is not None and not has_compaction_header(headers)

    def process(  # noqa: PLR0911, PLR0912 - one return per way a record can end
        self,
        batch: StateBatch,
        message: InputMessage,
        *,
        restore: bool = False,
        where: tuple[str, int, int] | None = None,
        keys: Callable[[bytes], bool] | None = None,
    ) -> tuple[list[EncodedOutput], DeadLetter | None]:
        """Process one record (where ``message`` says it is, or ``where``: its topic,
        partition and offset when the caller read them already); returns its outputs, or
        the dead letter it became.

        With ``restore`` the record only rebuilds state: no outputs and no dead letter are
        returned (they were written when the record was first processed). A growth marker
        and a compaction tombstone (``framework.growth.compaction``) change nothing and
        return neither. A tick (``framework.time.ticks``: keyless, or a compacted topic's
        tick key; before the placement check) of this app's (or naming no app) applies to the
        keys living in its partition there by the history steps its writer knew (and, given
        ``keys``, those it accepts: a catch-up's gained keys, the keys of this processor in a
        rebuild); another app's changes nothing and returns neither.
        Timers that failed meanwhile are dead letters ``take_letters`` gives.
        """
        if where is None:
            where = _where(message)
        topic, partition, offset = where
        key, raw = message.key(), message.value()
        route = self._routes.get(topic)
        if route is None:
            reason = f"no processor function for topic {topic!r}"
            return [], self._dead(message, where, "route", reason, restore)
        headers = readable_headers(message)
        if headers is None:
            return [], self._dead(message, where, "decode", UNREADABLE_REASON, restore)
        if key is None or key.startswith(route.prefix):  # (else neither marker nor tick)
            if is_marker_record(topic, key, headers):  # (a compacted topic's have a key)
                return [], self._marker(message, where, headers, restore)
            if is_tick_record(topic, key, headers):  # (a compacted topic's have a key)
                if self._time is None:  # (an app without time: nothing a tick could change)
                    return [], self._not_a_tick(message, where, headers, restore)
                return self._time.tick(batch, message, where, headers, restore=restore, keys=keys)
        if key is None or has_compaction_header(headers):
            return [], self._not_keyed_input(message, where, headers, key is None, restore)
        misplaced = self.placement.check(batch, headers, key, where, restore=restore)
        if misplaced is not None:
            return [], self._dead(message, where, "placement", misplaced, restore)
        table = route.table
        try:
            value = route.decode(raw) if table is None else self._tables.decode(topic, raw)
        except (ValidationError, ValueError, UnicodeDecodeError) as error:
            reason = describe_error(error)
            return [], self._dead(message, where, "decode", reason, restore)
        if table is not None:  # a table's record: it upserts the key's value (and its joins)
            record = Record(topic, partition, offset, key, value, message=message)
            outputs, refused = self._table_records.apply(batch, record, raw)
            if refused is not None:
                return [], self._dead(message, where, *refused, restore)
            return ([] if restore else outputs), None
        if self._time is not None:
            function, names = route.function, route.names
            return self._time.record(batch, message, where, value, function, names, restore)
        record = Record(topic, partition, offset, key, value, message=message)
        if route.single_store is not None:
            store = batch.store(route.single_store)
            saved: Any = store.savepoint(key)
            state: Any = store.key(key)
        else:
            stores = [batch.store(name) for name in route.stores]
            saved = [s.savepoint(key) for s in stores]
            state = {s.name: s.key(key) for s in stores}
        try:
            if route.tables:  # (its event time and the table data it reads: checked first)
                state = self._tables.views(batch, record, route.names, state, route.event_time)
            result = route.function(record, state)
            outputs = self._encode(result, key, where, route.function)
        except UnreadableRecordError as unreadable:
            self._rollback(batch, route, key, saved)
            return [], self._dead(message, where, "decode", str(unreadable), restore)
        except Exception as error:  # any failure of user code is handled by the policy
            self._rollback(batch, route, key, saved)
            if self.stop_on_error:
                raise ProcessorStoppedError(
                    f"the processor function failed on {topic}[{partition}]@{offset} "
                    f"(key {key!r}): {describe_error(error)}. The record was not processed and "
                    "state is at the batch before it. Fix the function or the record, then "
                    "restart; or set on_error: dead-letter to skip such records.",
                    at=(topic, partition, offset),
                ) from error
            reason = describe_error(error, with_trace=True)
            return [], self._dead(message, where, "processor", reason, restore)
        return ([] if restore else outputs), None

    def take_letters(self) -> list[DeadLetter]:
        """The dead letters of timers that failed (stage ``timer``) since the last call."""
        return [] if self._time is None else self._time.take_letters()

    @property
    def timing(self) -> TimeApplier | None:
        """How records and ticks are applied with time (``None``: the app keeps none); it
        knows each partition's time as read (``TimeApplier.floors``)."""
        return self._time

    def _not_a_tick(
        self,
        message: InputMessage,
        where: tuple[str, int, int],
        headers: Sequence[tuple[str, bytes | None]],
        restore: bool,
    ) -> DeadLetter | None:
        """A tick read by an app without time: nothing to do, unless it is malformed."""
        read = read_tick(headers)
        return (
            self._dead(message, where, "decode", read, restore) if isinstance(read, str) else None
        )

    def _not_keyed_input(
        self,
        message: InputMessage,
        where: tuple[str, int, int],
        headers: Sequence[tuple[str, bytes | None]],
        keyless: bool,
        restore: bool,
    ) -> DeadLetter | None:
        """A record without a key (not a marker: ``is_marker_record``), or with a
        ``splitstate.compaction`` header: none of the app's keyed records. A compaction
        tombstone is skipped (no dead letter); anything else claiming to be one, or keyless, is
        a dead letter."""
        if keyless:
            reason = "the record has no key; splitstate keeps state per key"
            return self._dead(message, where, "decode", reason, restore)
        refused = compaction_refusal(where[0], headers, message.value())
        if refused is None:
            return None  # a compaction tombstone: only for Kafka's log cleaner
        return self._dead(message, where, "placement", refused, restore)

    def _marker(
        self,
        message: InputMessage,
        where: tuple[str, int, int],
        headers: Sequence[tuple[str, bytes | None]],
        restore: bool,
    ) -> DeadLetter | None:
        """A record without a key that claims to be a growth marker: noted as one (no dead
        letter) if the registry records its growth, else a dead letter."""
        refused = self.placement.marker(where, headers)
        if refused is None:
            return None  # a growth marker: not a record of the app's
        return self._dead(message, where, "placement", refused, restore)

    @staticmethod
    def _rollback(batch: StateBatch, route: Route, key: bytes, saved: Any) -> None:
        if route.single_store is not None:
            batch.store(route.single_store).rollback(key, saved)
        else:
            for name, before in zip(route.stores, saved, strict=True):
                batch.store(name).rollback(key, before)

    def _dead(
        self,
        message: InputMessage,
        where: tuple[str, int, int],
        stage: DeadLetterStage,
        reason: str,
        restore: bool,
    ) -> DeadLetter | None:
        self.dead_letter_count += 1
        if restore:
            return None  # it was written when the record was first processed
        return DeadLetter.of(message, where, stage, reason)


def _where(message: InputMessage) -> tuple[str, int, int]:
    """``(topic, partition, offset)`` of a record to process."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        raise SplitstateError(
            f"a record to process has no topic, partition or offset ({topic}[{partition}]"
            f"@{offset}); only records read from Kafka (or StoredMessage) can be processed"
        )
    return topic, partition, offset
