"""Records whose headers cannot be read (issue 33, item 5).

A header name that is not UTF-8 text makes confluent-kafka's ``headers()`` fail; before the
fix that raised out of the record processor, and again out of the crash guard's skip: the
processor exited on every start, its partition never moved, no dead letter was written. Now
such a record is a dead letter (stage ``decode``) on every path that reads records, holding
its key and value and saying its headers were unreadable. (The real record, on a real broker:
``tests/integration/test_unreadable_headers.py``.)
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from framework import App, AppConfig, Output, Record
from framework.bootstrap.fold import AppFold
from framework.growth.placement import COUNT_HEADER
from framework.processing import RecordProcessor
from framework.records import UNREADABLE_HEADERS, UNREADABLE_HEADERS_HEADER, EncodedOutput
from framework.runtime.crashes import CrashGuard
from framework.runtime.size_letters import output_dead_letter
from framework.testing import TestDriver
from rebalance import TopicHistory, bucket, key_hash
from statestore import DatabaseIdentity, KeyState, ProcessorDatabase
from tests.clocks import ManualClock

TOPIC = "in"
N = 2  # the input's initial partition count


def counting_app() -> App:
    app = App(
        AppConfig.load(
            None,
            app_id="untrusted",
            inputs=[{"topic": TOPIC, "partitions": N}],
            outputs=[{"topic": "out", "partitions": N}],
            initial_processors=1,
        )
    )
    app.store("counts", int)

    @app.processor(TOPIC)
    def count(record: Record[bytes], state: KeyState[int]) -> Output:
        state.set((state.get() or 0) + 1)
        return Output(state.get())

    return app


def database(app: App) -> ProcessorDatabase:
    return ProcessorDatabase.in_memory(DatabaseIdentity("untrusted", 0), app.store_specs())


class UnreadableHeaders:
    """A consumed record whose header names confluent-kafka cannot decode, as its ``Message``
    behaves (2.16): the first ``headers()`` raises ``SystemError`` (from a
    ``UnicodeDecodeError``) and keeps a broken list, which any later ``headers()`` returns
    and which crashes the interpreter when read -- unless ``set_headers`` replaced it. The
    real one is written to a real broker in ``tests/integration/test_unreadable_headers.py``.
    """

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None) -> None:
        self._where = (topic, partition, offset)
        self._key = key
        self._headers: Any = None
        self.reads = 0

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return b"evil"

    def timestamp(self) -> tuple[int, int]:
        return (0, 0)

    def headers(self) -> Any:
        self.reads += 1
        if self._headers is not None:
            return self._headers
        if self.reads > 1:
            raise AssertionError("headers() read again unrepaired: the interpreter crashes here")
        try:
            b"\xff\xfe".decode()
        except UnicodeDecodeError as error:
            message = "<method 'headers'> returned a result with an exception set"
            raise SystemError(message) from error
        raise AssertionError("unreachable")

    def set_headers(self, headers: Any) -> None:
        self._headers = headers


@pytest.mark.parametrize("key", [b"apple", None])
def test_a_record_whose_header_names_cannot_be_read_is_a_dead_letter(key: bytes | None) -> None:
    app = counting_app()
    processor = RecordProcessor(app, {TOPIC: N})
    db = database(app)
    partition = 0 if key is None else bucket(key_hash(key), N, N)
    message = UnreadableHeaders(TOPIC, partition, 7, key)
    batch = db.begin()
    outputs, dead = processor.process(batch, message)
    batch.commit()
    assert message.reads >= 2  # the dead letter read them again, once they were replaced
    assert outputs == [] and dead is not None
    assert dead.stage == "decode"
    assert dead.reason.startswith("its headers cannot be read: a header name is not UTF-8 text")
    assert "Fix:" in dead.reason
    assert (dead.topic, dead.partition, dead.offset, dead.key, dead.value) == (
        TOPIC,
        partition,
        7,
        key,
        b"evil",
    )
    assert dead.headers == () and dead.headers_unreadable
    letter_headers = dict(dead.kafka_headers())
    assert letter_headers[UNREADABLE_HEADERS_HEADER] == UNREADABLE_HEADERS
    assert letter_headers["splitstate.stage"] == b"decode"
    assert letter_headers["splitstate.offset"] == b"7"
    assert db.get("counts", key or b"") is None  # nothing ran
    # restore mode (a rebuild, a catch-up) skips it the same way, without a second dead letter
    batch = db.begin()
    again = UnreadableHeaders(TOPIC, partition, 7, key)
    assert processor.process(batch, again, restore=True) == ([], None)
    batch.commit()
    assert db.get("counts", key or b"") is None


@pytest.mark.parametrize(
    "name",
    ["\ufffd\ufffd", "a\ufffdb", "\udcff", "caf\udce9"],
    ids=["fffd", "in-fffd", "surrogate", "mixed"],
)
def test_names_as_java_and_spark_read_bad_bytes_are_unreadable_too(name: str) -> None:
    # Java clients (so Spark) read a name that is not UTF-8 with U+FFFD for the bad bytes;
    # a name that is no text cannot come from Kafka at all
    driver = TestDriver(counting_app())
    driver.send(TOPIC, b"apple", b"v", [(name, b"x"), (COUNT_HEADER, b"2")])
    (dead,) = driver.dead_letters
    assert dead.stage == "decode" and dead.headers_unreadable
    assert driver.state("counts", b"apple") is None
    driver.send(TOPIC, b"apple", b"v", [("café", b"x"), ("", None), (COUNT_HEADER, b"2")])
    assert driver.state("counts", b"apple") == 1  # UTF-8 text names are fine
    assert len(driver.dead_letters) == 1


HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def test_the_spark_fold_skips_a_record_whose_header_name_spark_read_with_u_fffd() -> None:
    app = counting_app()
    apple = bucket(key_hash(b"apple"), N, N)
    rows: list[tuple[Any, ...]] = [
        (TOPIC, apple, 0, b"apple", b"", 1, None),
        (TOPIC, apple, 1, b"apple", b"", 1, [{"key": "\ufffd\ufffd", "value": b"x"}]),
        (TOPIC, apple, 2, b"apple", b"", 1, [{"key": COUNT_HEADER, "value": b"2"}]),
    ]
    names = ("topic", "partition", "offset", "key", "value", "timestamp", "headers")
    types = (pa.string(), pa.int32(), pa.int64(), pa.binary(), pa.binary(), pa.int64())
    columns = [pa.array([r[i] for r in rows], t) for i, t in enumerate(types)]
    columns.append(pa.array([r[6] for r in rows], HEADERS_TYPE))
    fold = AppFold(app, {TOPIC: N}, {TOPIC: TopicHistory.of(TOPIC, [N])})
    items = list(fold(pa.table(columns, names=list(names))))
    assert len(items) == 1 and fold.dead_letters == 1  # 2 of the 3 records applied
    driver = TestDriver(counting_app())  # as the runtime does
    for _topic, partition, _offset, key, value, _stamp, headers in rows:
        listed = [(h["key"], h["value"]) for h in headers or ()]
        driver.send(TOPIC, key, value, listed, partition=partition)
    assert driver.state("counts", b"apple") == 2 and len(driver.dead_letters) == 1


def test_the_crash_guard_skips_a_record_whose_headers_cannot_be_read() -> None:
    app = counting_app()
    db = database(app)
    guard = CrashGuard(db, limit=3, processor=0, clock=ManualClock(0.0, may_sleep=False))
    message = UnreadableHeaders(TOPIC, 0, 4, b"k")
    batch = db.begin()
    dead = guard.skip(batch, message, (TOPIC, 0, 4), "dead", restore=False)
    batch.commit()
    assert dead is not None and dead.stage == "crash"
    assert (dead.key, dead.value, dead.headers, dead.headers_unreadable) == (
        b"k",
        b"evil",
        (),
        True,
    )


def test_an_output_dead_letter_of_a_record_whose_headers_cannot_be_read() -> None:
    output = EncodedOutput("out", b"k", b"x" * 10, None, (TOPIC, 0, 4))
    message = UnreadableHeaders(TOPIC, 0, 4, b"k")
    dead = output_dead_letter(output, "too large", message)
    assert (dead.stage, dead.value, dead.headers, dead.headers_unreadable) == (
        "output",
        b"evil",
        (),
        True,
    )
