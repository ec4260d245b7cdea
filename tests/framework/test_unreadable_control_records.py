"""Control-log records no reader can read (written by anyone who can write to the topic, a
tool, another version): every reader -- a processor's start, a running processor,
``status``, ``scale`` -- stops at such a record the same way, naming the topic, its offset
and the fix, until ``ControlLog.drop`` (``splitstate control drop``) removed it; a record of
an unknown kind is ignored by all. None crashes with a raw exception.

The world is the simulation's in-memory Kafka (``tests/sim``) with the real runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from framework import App
from framework.coordination.control_log import ControlLog
from framework.coordination.scaling import request_scale
from framework.errors import SplitstateError
from framework.ops.status import collect_status
from framework.runtime.loop import ProcessorRuntime, RuntimeStats
from tests.sim.app import INPUT
from tests.sim.kafka import MemoryKafka
from tests.sim.one_key import KEY, one_key_world

#: control-log records no reader can read (by what is wrong with them)
CONTROL_JUNK = {
    "not JSON": b"not json",
    "a list": b"[1, 2]",
    "a string": b'"scale"',
    "no type": b'{"generation": 1}',
    "a type that is no string": b'{"type": 7}',
    "a missing field": b'{"type": "growth"}',
    "a bad integer": b'{"type": "handoff", "generation": "x", "source": 0, "target": 1, '
    b'"event": "READY"}',
    "wrong types": b'{"type": "instance", "processor": "zero", "instance": 5}',
    "a negative number": b'{"type": "scale", "generation": 1, "processors": -2, "partitions": {}}',
    "a number past JSON's doubles": b'{"type": "metadata_hash", "hash": 1e400}',
    "a number past 64 bits": b'{"type": "metadata_hash", "hash": 18446744073709551615}',
    "a boolean for a number": b'{"type": "abort", "generation": true}',
    "a float for an integer": b'{"type": "snapshot", "request": "r", "processor": 0.5}',
    "an unknown handoff event": b'{"type": "handoff", "generation": 1, "source": 0, '
    b'"target": 1, "event": "LEAVE"}',
    "a RELEASE without offsets": b'{"type": "handoff", "generation": 1, "source": 0, '
    b'"target": 1, "event": "RELEASE", "offsets": null}',
    "a bad stop point": b'{"type": "resumed", "generation": 1, "processor": 1, "stop_at": "x"}',
}


def started(tmp_path: Path) -> tuple[MemoryKafka, App]:
    """A world whose processor 0 ran once (the control log holds the app's records)."""
    kafka, app = one_key_world(tmp_path, records=3, seed=1, exactly_once=False)
    run(kafka, app)
    return kafka, app


def run(kafka: MemoryKafka, app: App, until: Callable[[RuntimeStats], bool] | None = None) -> int:
    """Run processor 0 until it processed every record (or ``until`` says); its records."""
    steps = iter(range(200))
    stop = until or (lambda stats: stats.records >= 3 or next(steps) >= 199)
    return ProcessorRuntime(app, 0, kafka=kafka).run(until=stop).records


def more(kafka: MemoryKafka) -> None:
    """One more input record (of the key of ``one_key_world``)."""
    record = {"key": KEY, "value": b"p:4", "headers": (), "timestamp_ms": 0, "origin": "p"}
    kafka.broker.append((INPUT, 0), record)


def append(kafka: MemoryKafka, topic: str, key: bytes, value: bytes | None) -> int:
    """Append one record; its offset."""
    return kafka.append(topic, [(key, value)]) - 1


@pytest.mark.parametrize("value", list(CONTROL_JUNK.values()), ids=list(CONTROL_JUNK))
def test_every_reader_stops_at_a_control_record_no_reader_can_read(
    tmp_path: Path, value: bytes
) -> None:
    kafka, app = started(tmp_path)
    topic = app.config.control_topic
    offset = append(kafka, topic, b"junk/1", value)
    refusal = (
        rf"control log '{topic}' .* at offset {offset} \(key b'junk/1'\): .* Fix: .*"
        rf"`splitstate control drop MODULE:APP --offset {offset}`"
    )
    with pytest.raises(SplitstateError, match=refusal):
        ControlLog(kafka, topic).read()
    with pytest.raises(SplitstateError, match=refusal):
        run(kafka, app)
    with pytest.raises(SplitstateError, match=refusal):
        collect_status(app, kafka=kafka)
    with pytest.raises(SplitstateError, match=refusal):
        request_scale(app, 2, kafka=kafka)


def test_a_running_processor_stops_at_a_control_record_no_reader_can_read(
    tmp_path: Path,
) -> None:
    kafka, app = one_key_world(tmp_path, records=3, seed=1, exactly_once=False)
    topic = app.config.control_topic
    written: list[int] = []
    steps = iter(range(2000))

    def junk_once_running(stats: RuntimeStats) -> bool:
        if not written and stats.records >= 3:
            written.append(append(kafka, topic, b"junk/1", b'{"type": "growth"}'))
        assert next(steps) < 1999, "the processor read on past the record"
        return False

    with pytest.raises(SplitstateError, match=r"at offset \d+ \(key b'junk/1'\)") as refused:
        run(kafka, app, junk_once_running)
    assert f"at offset {written[0]} " in str(refused.value)


def test_a_control_record_of_an_unknown_kind_is_ignored_by_every_reader(tmp_path: Path) -> None:
    kafka, app = started(tmp_path)
    topic = app.config.control_topic
    append(kafka, topic, b"later/1", b'{"type": "from-a-later-version", "processors": 9}')
    state = ControlLog(kafka, topic).read()
    assert state.ignored[-1] == "unknown record type 'from-a-later-version'"
    assert state.processors == 1
    more(kafka)
    assert run(kafka, app, lambda stats: stats.records >= 1) == 1
    assert collect_status(app, kafka=kafka).ignored == 1


def test_a_dropped_control_record_is_skipped_by_every_reader(tmp_path: Path) -> None:
    kafka, app = started(tmp_path)
    topic = app.config.control_topic
    control = ControlLog(kafka, topic)
    before = control.read()
    offset = append(kafka, topic, b"junk/1", b"[1, 2]")
    with pytest.raises(SplitstateError, match="no record at offset 99"):
        control.drop(99)
    with pytest.raises(SplitstateError, match="can be read: it is a fact of the protocol"):
        control.drop(0)
    assert control.drop(offset) == b"junk/1"
    assert control.drop(offset) == b"junk/1"  # dropped already: nothing more is written
    assert kafka.read_log(topic)[-1][1:] == (b"junk/1", None)
    assert len(kafka.read_log(topic)) == offset + 2
    assert control.read() == before
    more(kafka)
    assert run(kafka, app, lambda stats: stats.records >= 1) == 1
    assert collect_status(app, kafka=kafka).generation == 0
    # the record stays dropped once compaction removed it, and once the tombstone went too
    kafka.broker.partition((topic, 0)).records = [
        r for r in kafka.broker.records(topic, 0) if r.key != b"junk/1"
    ]
    assert control.read().processors == 1
