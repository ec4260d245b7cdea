"""Two runs of ``expand`` at once write the topic registry from their own copies: every reader
keeps the first record of each fact (``framework.coordination.entry_order``), so a record
written from an older copy changes nothing, and a run goes on from the entry kept
(``framework.growth.expand_writes.write_kept``)."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import orjson
import pytest

from framework.coordination.entry_order import supersedes
from framework.coordination.registry import (
    REGISTRY_TOPIC,
    Announcement,
    Growth,
    TopicEntry,
    TopicRegistry,
)
from framework.growth.expand_writes import write_kept
from framework.kafka import TopicSpec
from rebalance import TopicHistory
from tests.clocks import ManualClock
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka

TOPIC = "in"
GROWN = TopicHistory.of(TOPIC, [4]).grown(8, dict.fromkeys(range(4, 8), 10))
#: the growth 4 -> 8 at each stage: recorded, fenced, done (markers recorded)
RECORDED = TopicEntry(GROWN, growth=Growth(8, 1000))
FENCED = replace(RECORDED, growth=Growth(8, 1000, fence_ends={0: 20, 1: 20, 2: 20, 3: 20}))
DONE = TopicEntry(GROWN.with_markers({4: 21, 5: 21, 6: 21, 7: 21}))
#: then a shrink 8 -> 4 recorded
SHRINKING = TopicEntry(
    DONE.history.shrunk(4, {0: 30, 1: 30, 2: 30, 3: 30}), growth=Growth(4, 5000, kind="shrink")
)
DRAINS = dict.fromkeys(range(4, 8), 40)


def test_a_change_goes_forward_through_its_stages() -> None:
    stages = [TopicEntry(TopicHistory.of(TOPIC, [4])), RECORDED, FENCED, DONE, SHRINKING]
    for before, after in itertools.pairwise(stages):
        assert supersedes(after, before), (before, after)
        assert not supersedes(before, after), (after, before)


@pytest.mark.parametrize(
    ("why", "record", "current"),
    [
        ("a done growth written after the next change was recorded", DONE, SHRINKING),
        (
            "the same step recorded again with other starts",
            RECORDED,
            replace(
                RECORDED,
                history=TopicHistory.of(TOPIC, [4]).grown(8, dict.fromkeys(range(4, 8), 11)),
            ),
        ),
        (
            "the same step recorded again at another time",
            replace(RECORDED, growth=Growth(8, 1001)),
            RECORDED,
        ),
        (
            "other fence ends",
            replace(FENCED, growth=Growth(8, 1000, fence_ends={0: 25, 1: 20, 2: 20, 3: 20})),
            FENCED,
        ),
        (
            "a shrink's holds measured again, later",
            replace(SHRINKING, history=DONE.history.shrunk(4, {0: 31, 1: 30, 2: 30, 3: 30})),
            SHRINKING,
        ),
        (
            "another history from the start",
            TopicEntry(TopicHistory.of(TOPIC, [2, 4], {2: 0, 3: 0})),
            TopicEntry(TopicHistory.of(TOPIC, [4])),
        ),
    ],
)
def test_a_record_written_from_an_older_copy_is_not_kept(
    why: str, record: TopicEntry, current: TopicEntry
) -> None:
    assert not supersedes(record, current), why


def test_an_announced_change_is_kept_until_its_count_is_recorded() -> None:
    announced = replace(DONE, compacted=True, announced=Announcement(4, "shrink", 4000))
    other = replace(announced, announced=Announcement(6, "shrink", 4001))
    assert supersedes(announced, DONE)
    assert not supersedes(other, announced)  # another change announced meanwhile
    assert not supersedes(DONE, announced)  # the announcement withdrawn by an older copy
    assert supersedes(replace(SHRINKING, compacted=True), announced)
    grown = TopicEntry(DONE.history.grown(12, dict.fromkeys(range(8, 12), 0)), growth=Growth(12, 1))
    assert not supersedes(grown, announced)  # a count other than the one announced


def test_settings_writers_take_at_their_start_are_facts_and_compacted_only_turns_on() -> None:
    assert supersedes(DONE, DONE)  # an identical copy
    assert not supersedes(replace(DONE, lease_ms=2000), DONE)
    assert not supersedes(replace(DONE, delivery_timeout_ms=1), DONE)
    assert not supersedes(replace(DONE, key_hash="other"), DONE)
    assert supersedes(replace(DONE, compacted=True), DONE)
    assert not supersedes(DONE, replace(DONE, compacted=True))


def world() -> tuple[MemoryKafka, TopicRegistry]:
    kafka = MemoryKafka(Broker(random.Random(0)), ManualClock())
    kafka.create_topics([TopicSpec(TOPIC, 8)])
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    return kafka, registry


def test_every_reader_keeps_the_first_record_of_each_fact() -> None:
    # seed 561: the rival recorded the shrink; the operator then wrote the growth it had
    # finished from its own copy, and the shrink's holds measured again
    kafka, registry = world()
    registry.write(RECORDED)
    registry.write(DONE)
    registry.write(SHRINKING)
    registry.write(DONE)
    later = DONE.history.shrunk(4, {0: 31, 1: 31, 2: 30, 3: 30})
    registry.write(replace(SHRINKING, history=later))
    assert len(kafka.read_log(REGISTRY_TOPIC)) == 10  # each under its own key, and `in`
    assert registry.read()[TOPIC] == SHRINKING
    done = replace(SHRINKING, growth=None, history=SHRINKING.history.with_drains(DRAINS))
    registry.write(done)
    assert registry.read()[TOPIC] == done
    registry.write(SHRINKING)  # and no way back
    assert registry.read()[TOPIC] == done


def test_a_tombstone_removes_the_record_of_its_key_as_compaction_will() -> None:
    kafka, registry = world()
    registry.write(RECORDED)
    registry.write(FENCED)
    fenced, copy = kafka.read_log(REGISTRY_TOPIC)[-2:]
    assert fenced.key is not None and fenced.key.startswith(b"in/")  # a key per record
    assert copy.key == b"in" and copy.value == fenced.value  # and for readers before it
    kafka.append(REGISTRY_TOPIC, [(fenced.key, None), (copy.key, None)])
    assert registry.read()[TOPIC] == RECORDED
    for key in {r.key for r in kafka.read_log(REGISTRY_TOPIC) if r.key is not None}:
        kafka.append(REGISTRY_TOPIC, [(key, None)])
    assert registry.read().get(TOPIC) is None  # every record of it removed: not registered
    registry.write(DONE)
    assert registry.read()[TOPIC] == DONE


def test_a_record_of_an_older_splitstate_keyed_by_the_topic_is_read_as_compaction_leaves_it() -> (
    None
):
    kafka, registry = world()
    kafka.append(REGISTRY_TOPIC, [(TOPIC.encode(), orjson.dumps(RECORDED.to_record()))])
    kafka.append(REGISTRY_TOPIC, [(TOPIC.encode(), orjson.dumps(FENCED.to_record()))])
    assert registry.read()[TOPIC] == FENCED  # the last of its key, as compaction keeps it
    registry.write(DONE)
    assert registry.read()[TOPIC] == DONE


def test_a_run_goes_on_from_the_record_kept() -> None:
    _kafka, registry = world()
    registry.write(SHRINKING)
    said: list[str] = []
    kept = write_kept(registry, DONE, said.append)  # an operator's copy, one change behind
    assert kept == SHRINKING
    assert "another run recorded the change of in first" in said[0]
    assert write_kept(registry, replace(SHRINKING, lease_ms=2000), said.append) == SHRINKING
