"""The live loop's holds (``framework.runtime.holds``) on a consumer that records what it is
told: a record a gate holds stops its partition (paused; the records after it dropped), a
marker is never held (also one keyed by its id, as on a compacted topic), a held partition
read on from its record once the gate opens, and one sent back before it released; a tick
waits for every key it could reach."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from framework.growth.markers import MARKER_HEADER
from framework.kafka import KafkaConsumer, Message
from framework.processing import StoredMessage
from framework.runtime.holds import Holds, Taken
from framework.time.ticks import tick_headers
from rebalance import Grow, Shrink, TopicHistory, bucket, key_hash
from rebalance.positions import Position

N = 2
HISTORY = TopicHistory(
    "in", (N, 4, N), (Grow(4, {2: 0, 3: 0}, {2: 0, 3: 0}), Shrink(N, {0: 5, 1: 5}))
)


class Consumer:
    """What a consumer was told to do."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def pause(self, positions: Iterable[Position]) -> None:
        self.calls.append(("pause", sorted(positions)))

    def resume(self, positions: Iterable[Position]) -> None:
        self.calls.append(("resume", sorted(positions)))

    def seek(self, position: Position, offset: int) -> None:
        self.calls.append(("seek", (position, offset)))


def record(partition: int, offset: int, key: bytes | None, headers: object = None) -> Taken:
    message = StoredMessage("in", partition, offset, key, b"v", None, headers)  # type: ignore[arg-type]
    return cast("Message", message), "in", partition, offset


def merged_key(text: str = "k{}") -> bytes:
    """A key that lived in 2 with 4 partitions: merged into 0 by the shrink."""
    return next(
        k
        for k in (text.format(i).encode() for i in range(10_000))
        if bucket(key_hash(k), N, 4) == 2
    )


def nothing(_position: Position) -> int | None:
    """No partition read yet."""
    return None


def holds() -> tuple[Holds, Consumer]:
    consumer = Consumer()
    return Holds(0, cast("KafkaConsumer", consumer), {"in": HISTORY}), consumer


def test_a_held_record_stops_its_partition_and_reads_on_from_it_once_open() -> None:
    held, consumer = holds()
    own = next(k for k in (f"o{i}".encode() for i in range(999)) if bucket(key_hash(k), N, 4) == 0)
    batch = [record(0, 5, own), record(1, 0, b"x"), record(0, 6, merged_key()), record(0, 7, own)]
    kept = held.cut(batch, nothing)
    assert [r[3] for r in kept] == [5, 0]  # 0's own key before it, and the other partition
    assert consumer.calls == [("pause", [("in", 0)])]
    assert held.held[("in", 0)].offset == 6
    held.recheck(nothing)  # 2's drain not recorded: still held
    assert ("in", 0) in held.held
    held.gates.adopt({"in": HISTORY.with_drains({2: 3, 3: 0})})
    held.recheck({("in", 0): 6, ("in", 2): 4, ("in", 3): 1}.get)
    assert not held.held
    assert consumer.calls[-2:] == [("seek", (("in", 0), 6)), ("resume", [("in", 0)])]


def test_a_marker_is_never_held_even_keyed_by_its_id() -> None:
    held, _consumer = holds()
    # a compacted topic's marker has its id as key: one whose id hashes like a merged key
    topic_id = next(
        f"in/1/4/{c}" for c in range(10_000) if bucket(key_hash(f"in/1/4/{c}".encode()), N, 4) == 2
    )
    marker = record(0, 6, topic_id.encode(), [(MARKER_HEADER, topic_id.encode())])
    keyless = record(0, 7, None, [(MARKER_HEADER, b"in/1/4/2")])
    assert held.cut([marker, keyless], nothing) == [marker, keyless]
    assert not held.held


def test_a_partition_sent_back_before_its_held_record_is_released() -> None:
    held, consumer = holds()
    held.cut([record(0, 6, merged_key())], nothing)
    held.release([("in", 0), ("in", 1)])
    assert not held.held and consumer.calls[-1] == ("resume", [("in", 0)])


def tick(partition: int, offset: int) -> Taken:
    return record(partition, offset, None, tick_headers(50_000, 50_000))


def test_a_tick_waits_for_every_key_it_could_reach() -> None:
    """A tick applies to every key living in its partition there, so it waits as a record of
    any of them would: in a growth's new partition until the parent passed the marker, in a
    shrink's survivor until the deleted partitions merging into it are drained. Read before,
    it would close a moved key's windows ahead of the key's records still in the parent (or
    the deleted partition), which would then be late here and not on a replay."""
    held, consumer = holds()
    own = next(k for k in (f"o{i}".encode() for i in range(999)) if bucket(key_hash(k), N, 4) == 2)
    kept = held.cut([tick(2, 0), record(2, 1, own)], nothing)
    assert kept == []
    assert held.held[("in", 2)].offset == 0 and consumer.calls == [("pause", [("in", 2)])]
    held.recheck({("in", 0): 0}.get)  # the parent not past its marker at 0 yet
    assert ("in", 2) in held.held
    held.recheck({("in", 0): 1}.get)
    assert not held.held and consumer.calls[-2:] == [
        ("seek", (("in", 2), 0)),
        ("resume", [("in", 2)]),
    ]
    assert held.cut([tick(2, 0), record(2, 1, own)], {("in", 0): 1}.get) != []
    survivor = held.cut([tick(0, 4), tick(0, 6)], nothing)
    assert [r[3] for r in survivor] == [4]  # before the shrink's hold at 5: nothing to wait for
    assert held.held[("in", 0)].offset == 6
    held.gates.adopt({"in": HISTORY.with_drains({2: 3, 3: 0})})
    held.recheck({("in", 0): 6, ("in", 2): 3, ("in", 3): 1}.get)  # 2 not past its drain at 3
    assert ("in", 0) in held.held
    held.recheck({("in", 0): 6, ("in", 2): 4, ("in", 3): 1}.get)
    assert ("in", 0) not in held.held
