"""A broker-free test driver for users' unit tests (like Kafka Streams' TopologyTestDriver).

::

    driver = TestDriver(app)
    driver.send("words", b"apple")
    assert driver.output_values("word-counts") == [{"word": "apple", "count": 1}]
    assert driver.state("counts", b"apple") == 1

A table's value (``App.table``) is read with ``table(topic, key, at=...)``.

Records go through exactly the code the runtime uses (decoding, validation, the processor
function, dead letters, rollback of failed records), with state in memory. Each ``send`` is
one committed batch. Keys are placed on partitions as producers would place them. An app with
several inputs and ``time.input_order: canonical`` applies them as the live loop does
(``framework.order``): each record (or tick) waits in a merge buffer until no input can still
precede it, then is applied as one batch; ``pending`` says how many wait. ``advance_time`` lets
``time.max_input_wait`` pass as well: what still waits then is released by forced ticks, as
the runtime writes them (a tick with the floor that releases the least waiting item, on each
partition that holds it back). Forced ticks read into the merge buffer but not applied yet
are kept with the driver's database: a driver going on from it (``database=``) reads them
again first (at their partitions' next offsets), as a processor reads them again from Kafka.

What an app writes to its internal topics (``App.group_by``) is read back as its input, each
record on the partition linear hashing places its key, in the order written, before ``send``
(or ``tick``) returns; ``outputs(internal_topic)`` lists it.

A failure of the app's own code (its function raises or returns what cannot be written, a
timer or a window's result fails) raises, so that a test fails on a bug:
``TestDriver(app, on_error="dead-letter")`` makes it a dead letter instead, as the runtime
does by default. Records the app cannot take (undecodable, late, misplaced) are dead letters
either way.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any, Literal
from weakref import WeakKeyDictionary

import orjson

from framework.app import App
from framework.config import AppConfig
from framework.decoding import decoder
from framework.errors import ProcessorStoppedError
from framework.growth.placement import UNFENCED_SCOPE
from framework.input_times import ORDER_SCOPE, InputTimes, ordered
from framework.order import NO_FLOOR, MergeBuffer
from framework.processing import (
    DeadLetter,
    EncodedOutput,
    RecordProcessor,
    StoredMessage,
    encode_input,
)
from framework.tables import KeyTable
from framework.time.rederive import rederive_due
from framework.time.ticks import is_tick_record, tick_headers
from rebalance import bucket, key_hash
from statestore import DatabaseIdentity, ProcessorDatabase

__all__ = ["TestDriver"]

#: a forced tick as written: its partition, floor (its timestamp) and headers
_Forced = tuple[str, int, int, list[tuple[str, bytes | None]]]
#: by database, the forced ticks its last driver read but did not apply yet, by where
#: (topic, partition, offset): what a driver going on from the database reads again
_HELD: WeakKeyDictionary[ProcessorDatabase, dict[tuple[str, int, int], _Forced]] = (
    WeakKeyDictionary()
)


class TestDriver:
    """Feed records to an app and read its outputs, dead letters and state; no Kafka."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        app: App,
        config: AppConfig | None = None,
        *,
        database: ProcessorDatabase | None = None,
        on_error: Literal["raise", "dead-letter"] = "raise",
    ) -> None:
        """``database``: the state of an earlier driver to go on from (e.g. of an earlier
        version of the app, deployed anew over its state), at its offsets; as a processor
        does at start, its keys' due times are derived again when the app declares its
        windows and timers otherwise (``framework.time.rederive``).

        ``on_error``: ``"raise"`` (default) raises the exception of the app's code that
        failed on a record (its state stays at the batch before it, nothing is output); what
        splitstate refuses of what the code did (a timer set due again at once, say), and any
        failure of an app configured with ``on_error: stop``, raise ``ProcessorStoppedError``,
        as its processor stops. ``"dead-letter"`` follows the app's config (``on_error``), as
        the runtime does."""
        if on_error not in ("raise", "dead-letter"):
            raise ValueError(
                f"TestDriver(on_error={on_error!r}): it takes 'raise' (a failure of the app's "
                "code raises) or 'dead-letter' (as the app's config says)"
            )
        if config is not None:
            app.configure(config)
        app.check()
        self.app = app
        self.config = app.config
        self.database = database or ProcessorDatabase.in_memory(
            DatabaseIdentity(self.config.app_id, 0), app.store_specs()
        )
        rederive_due(self.database, app)
        self._processor = RecordProcessor(
            app,
            {t.topic: t.partitions for t in self.config.inputs},
            stop_on_error=True if on_error == "raise" else None,
        )
        # (an app configured to stop raises ProcessorStoppedError, as its processor stops)
        self._raise = on_error == "raise" and self.config.on_error != "stop"
        self._next_offset: dict[tuple[str, int], int] = defaultdict(int, self.database.offsets())
        self._outputs: dict[str, list[EncodedOutput]] = defaultdict(list)
        #: outputs to the app's internal topics (``group_by``), to be read back as its input
        self._internal = {spec.topic for spec in app.repartitions.values()}
        self._routed: deque[EncodedOutput] = deque()
        self._routing = False
        self.dead_letters: list[DeadLetter] = []
        self._clock = 0
        #: the canonical order of several inputs (``None``: each record applied as sent)
        self._order: MergeBuffer[StoredMessage] | None = None
        self._times: InputTimes | None = None
        if ordered(app):
            self._times = InputTimes(app)
            self._order = MergeBuffer([t.topic for t in self.config.inputs])
            marks = self.database.progress(ORDER_SCOPE)
            for topic in self.config.inputs:
                for partition in range(topic.partitions):
                    where = (topic.topic, partition)
                    start = self._next_offset[where]
                    self._order.assign(where, start, marks.get(where, NO_FLOOR))
        held = _HELD.get(self.database, {})
        #: the forced ticks read but not applied yet (see the module)
        self._held: dict[tuple[str, int, int], _Forced] = {}
        _HELD[self.database] = self._held
        for _where, (topic_name, partition, floor, headers) in sorted(held.items()):
            self._process(
                topic_name, partition, None, b"", timestamp=floor, headers=headers, wanted=False
            )

    @property
    def pending(self) -> int:
        """How many records and ticks sent wait in the merge buffer (``time.input_order:
        canonical``) for an input that may still precede them (not the forced ticks of
        ``advance_time``, which nothing waits for)."""
        order = self._order
        return 0 if order is None else order.wanted()

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: Any = b"",
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp: int | None = None,
        *,
        partition: int | None = None,
    ) -> None:
        """Process one record of input ``topic`` as one batch, with Kafka ``timestamp`` (ms;
        default: the count of records sent so far), on ``partition`` (default: where
        producers place its key; a keyed record on a partition where linear hashing does not
        place it is a dead letter, stage ``placement``, as in the runtime). ``value`` is
        encoded as ``Output`` values are: bytes as they are, text as UTF-8, a pydantic model or
        any JSON-able value as JSON."""
        if partition is None:
            partitions = self.config.input_topic(topic).partitions
            partition = 0 if key is None else bucket(key_hash(key), partitions, partitions)
        self._clock += 1
        raw = encode_input(value, f"TestDriver.send to {topic!r}")
        self._process(
            topic,
            partition,
            key,
            raw,
            timestamp=self._clock if timestamp is None else timestamp,
            headers=list(headers or []),
        )

    def advance_time(self, to: int, *, wall: int | None = None) -> None:
        """Let time pass for keys that get no records: a tick (``framework.time.ticks``)
        with event-time floor ``to`` and processing time ``wall`` (default ``to``) on every
        input partition, as the runtime records one when a partition's time moves on.
        Windows close, values expire and timers fire for the keys due by then. With
        ``time.input_order: canonical``, ``time.max_input_wait`` passes too: what still waits
        for another input is released by forced ticks (see the module)."""
        for topic in self.config.inputs:
            for partition in range(topic.partitions):
                self.tick(topic.topic, partition, to, wall)
        self._force_waiting(to if wall is None else wall)

    def tick(
        self,
        topic: str,
        partition: int,
        floor: int,
        wall: int | None = None,
        *,
        keys: Callable[[bytes], bool] | None = None,
    ) -> None:
        """One tick with event-time ``floor`` and processing time ``wall`` (default
        ``floor``) on ``partition`` of input ``topic`` alone, at its next offset: it applies
        to the keys living there that have something due by it. ``keys``: only to the keys
        it accepts (an oracle replaying the ticks of a grown topic, each to the keys that
        lived in its partition there)."""
        headers: list[tuple[str, bytes | None]] = list(
            tick_headers(floor, floor if wall is None else wall, self.config.app_id)
        )
        self._process(topic, partition, None, b"", timestamp=floor, headers=headers, keys=keys)

    def _force_waiting(self, wall: int) -> None:
        """Release what waits in the merge buffer as the runtime does once
        ``time.max_input_wait`` passed: a forced tick (processing time ``wall``) with floor
        ``Blocker.needs`` on each partition that holds the least waiting item back, while
        anything but such ticks waits."""
        order = self._order
        while order is not None and order.wanted():
            blocking = order.waited_for()
            if blocking is None or blocking.missing or not blocking.blockers:
                return  # (an input with no partition: nothing to tick)
            for blocker in blocking.blockers:
                topic, partition = blocker.position
                headers = tick_headers(blocker.needs, wall, self.config.app_id, forced=True)
                self._process(
                    topic,
                    partition,
                    None,
                    b"",
                    timestamp=blocker.needs,
                    headers=list(headers),
                    wanted=False,
                )

    def _process(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        raw: bytes | None,
        *,
        timestamp: int,
        headers: list[tuple[str, bytes | None]],
        keys: Callable[[bytes], bool] | None = None,
        wanted: bool = True,
    ) -> None:
        """Process one record as one batch, at the partition's next offset (a tick: to the
        ``keys`` it accepts, when given; ``wanted=False``: a forced tick, which nothing waits
        for)."""
        offset = self._next_offset[(topic, partition)]
        message = StoredMessage(topic, partition, offset, key, raw, timestamp, headers)
        order, times = self._order, self._times
        if order is None or times is None:
            self._apply(message, keys)
            self._next_offset[(topic, partition)] = offset + 1
            self._route()
            return
        self._next_offset[(topic, partition)] = offset + 1  # (read: waiting, or applied)
        if not wanted and key is None:  # (a forced tick: kept until applied)
            self._held[(topic, partition, offset)] = (topic, partition, timestamp, headers)
        time = times.of(topic, partition, offset, message)
        if key is None and time is None and is_tick_record(topic, key, headers):
            wanted = False  # (another app's tick: nothing here waits for it)
        order.add((topic, partition), offset, key, time, message, wanted=wanted)
        for item in order.release():
            self._apply(item.payload, keys if item.payload is message else None, item.mark)
        self._route()

    def _route(self) -> None:
        """Read back what the app wrote to its internal topics, each record at its
        partition's next offset, in the order written (as a processor reads the topic), until
        nothing more is written to them."""
        if self._routing:
            return
        self._routing = True
        try:
            while self._routed:
                output = self._routed.popleft()
                partitions = self.config.input_topic(output.topic).partitions
                partition = bucket(key_hash(output.key), partitions, partitions)
                self._clock += 1
                headers = [
                    (name, value.encode() if isinstance(value, str) else value)
                    for name, value in output.headers or ()
                ]
                self._process(
                    output.topic,
                    partition,
                    output.key,
                    output.value,
                    timestamp=self._clock,
                    headers=headers,
                )
        finally:
            self._routing = False

    def _apply(
        self,
        message: StoredMessage,
        keys: Callable[[bytes], bool] | None,
        mark: int | None = None,
    ) -> None:
        """Apply one record as one batch (with ``mark``, its partition's mark there)."""
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        batch = self.database.begin()
        failed: Exception | None = None
        try:
            outputs, dead = self._processor.process(batch, message, keys=keys)
        except ProcessorStoppedError as stopped:
            batch.abort()
            cause = stopped.__cause__
            if not (self._raise and isinstance(cause, Exception) and _users(cause)):
                raise
            cause.add_note(
                f"splitstate TestDriver: {stopped} (In a test: "
                "TestDriver(app, on_error='dead-letter') makes it a dead letter instead.)"
            )
            failed = cause
        except BaseException:
            batch.abort()
            raise
        if failed is not None:  # raised here, out of the handler: its own cause stays its own
            raise failed
        batch.set_offset(topic, partition, offset + 1)
        self._held.pop((topic, partition, offset), None)
        if mark is not None:
            batch.set_progress(ORDER_SCOPE, topic, partition, mark)
        batch.commit()
        for output in outputs:
            self._outputs[output.topic].append(output)
            if output.topic in self._internal:
                self._routed.append(output)
        if dead is not None:
            self.dead_letters.append(dead)
        self.dead_letters += self._processor.take_letters()

    def outputs(self, topic: str | None = None) -> list[EncodedOutput]:
        """Outputs written to ``topic`` (default: the only output topic; or an internal topic
        of ``group_by``), oldest first; ``ValueError`` for a topic the app does not write."""
        written = [o.topic for o in self.config.outputs]
        if topic in self._internal:
            return list(self._outputs[topic])
        if topic is None:
            if len(written) != 1:
                raise ValueError(f"the app has several output topics {written}; name one")
            topic = written[0]
        if topic not in written:
            raise ValueError(
                f"the app writes no topic {topic!r}: its output topics are {written} "
                "(dead letters are in TestDriver.dead_letters)"
            )
        return list(self._outputs[topic])

    def output_values(self, topic: str | None = None) -> list[Any]:
        """Output values parsed as JSON (``None`` for tombstones)."""
        return [None if o.value is None else orjson.loads(o.value) for o in self.outputs(topic)]

    def state(self, store: str, key: bytes, default: Any = None) -> Any:
        """The committed state of ``key`` in ``store``."""
        return self.database.get(store, key, default)

    def table(self, topic: str, key: bytes, at: int | None = None) -> Any:
        """The committed value of ``key`` in table ``topic`` (``App.table``): the newest
        version, or the version as of event time ``at`` (``KeyTable.latest`` and ``at``);
        ``None`` when it has none."""
        spec = self.app.tables[topic]
        raw = self.database.get(spec.store, key)
        view: KeyTable[Any] = KeyTable(spec, key, raw, decoder(spec.value_type), lambda: at)
        return view.latest() if at is None else view.at(at)

    def unfenced(self) -> dict[tuple[str, int], int]:
        """Records processed without a ``splitstate.count`` header, per input partition."""
        return self.database.progress(UNFENCED_SCOPE)

    def offsets(self) -> dict[tuple[str, int], int]:
        """Next offset per input partition."""
        return self.database.offsets()


def _users(error: Exception) -> bool:
    """Whether ``error`` is the app's code's own (not splitstate's refusal of what it did,
    e.g. a timer set due again at once: that stays a ``ProcessorStoppedError``)."""
    return not type(error).__module__.startswith(("framework.", "statestore.", "rebalance."))
