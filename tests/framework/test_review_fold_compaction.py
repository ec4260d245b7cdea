"""Review of the registry fold (``framework.coordination.entry_order``) against the log
cleaner: compaction keeps only a key's last record (below the cleanable point), so a reader
after compaction folds a suffix of what a reader before it folded. Each test here shows an
entry that changed under compaction while the registry had one key per topic; with a key per
record (``framework.coordination.registry``) the surviving records fold to the same entry."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from framework.coordination.registry import (
    REGISTRY_TOPIC,
    RegistryRecordError,
    TopicEntry,
)
from framework.growth.expand_writes import write_kept
from rebalance import TopicHistory
from tests.framework.test_registry_first_wins import DONE, SHRINKING, world
from tests.sim.kafka import MemoryKafka

TOPIC = "in"


class Cleaner(random.Random):
    """The log cleaner's draws: the cleanable point at ``cut`` (the first offset of the
    active segment), no tombstone removed."""

    def __init__(self, cut: int) -> None:
        super().__init__(0)
        self._cut = cut

    def randint(self, a: int, b: int) -> int:
        return max(a, min(self._cut, b))

    def random(self) -> float:
        return 1.0


def compact(kafka: MemoryKafka, cut: int) -> None:
    """One pass of the cleaner over the registry, everything below ``cut`` cleanable."""
    kafka.broker.compact(REGISTRY_TOPIC, Cleaner(cut))


def test_a_rejected_record_left_first_by_the_cleaner_does_not_become_the_entry() -> None:
    # the operator recorded the shrink (holds at 30); a rival's copy, measured later (31),
    # is rejected (review-fold finding 1: with one key per topic, the cleaner left the
    # rejected record first, and the fold then kept it)
    kafka, registry = world()
    registry.write(SHRINKING)
    later = replace(SHRINKING, history=DONE.history.shrunk(4, {0: 31, 1: 31, 2: 30, 3: 30}))
    assert write_kept(registry, later, lambda _line: None) == SHRINKING
    records = kafka.read_log(REGISTRY_TOPIC)
    assert len(records) == 4  # kept, rejected: each under its own key (and again under `in`)
    assert registry.read()[TOPIC] == SHRINKING
    for cut in range(records[-1].offset + 2):  # wherever the active segment starts
        compact(kafka, cut=cut)
        left = kafka.read_log(REGISTRY_TOPIC)
        assert {r.key for r in left} == {r.key for r in records}  # a copy under `in` at most
        assert registry.read()[TOPIC] == SHRINKING


# fixed: review-fold finding 4: register_all writes a new topic's entry without reading back
# what was kept; a second registration (rejected by the fold) stays the key's last record and
# compaction makes it the entry
def test_a_rejected_registration_does_not_become_the_entry_after_compaction() -> None:
    # two first registrations of a shared topic (another app's config, a producer) at once:
    # both read the registry without it, then both append their entry
    kafka, registry = world()
    assert TOPIC not in registry.read()  # the second registrar's read
    first = registry.register(TOPIC, 8)  # the first registrar, read and write
    second = TopicEntry(TopicHistory.of(TOPIC, [4]))
    registry.write_all([second])  # the second registrar's append (register_all after its read)
    assert registry.read()[TOPIC] == first  # every reader places keys with 8 partitions
    compact(kafka, cut=kafka.broker.end_offset(REGISTRY_TOPIC, 0))
    assert registry.read()[TOPIC] == first  # before the fix: 4 partitions from now on


# fixed: review-fold finding 4: a registration read before the topic was registered and written
# after it grew is rejected by the fold but stays the key's last record; compaction then takes
# the growth back
def test_a_stale_registration_after_a_growth_does_not_undo_it_after_compaction() -> None:
    kafka, registry = world()
    assert TOPIC not in registry.read()  # a producer's register_all reads; then it stalls
    registry.register(TOPIC, 4)  # meanwhile the app registers it and `expand` grows it
    registry.write(DONE)
    registry.write_all([TopicEntry(TopicHistory.of(TOPIC, [4]))])  # the producer's append
    assert registry.read()[TOPIC] == DONE
    compact(kafka, cut=kafka.broker.end_offset(REGISTRY_TOPIC, 0))
    assert registry.read()[TOPIC] == DONE  # before the fix: 4 partitions, the growth forgotten


# fixed: review-fold finding 1: after an unreadable record, a rejected (stale) record is the
# first readable one the cleaner leaves; the fold then takes it as the entry
def test_a_stale_record_after_an_unreadable_one_stays_rejected_after_compaction() -> None:
    kafka, registry = world()
    registry.write(SHRINKING)
    bad = f"{TOPIC}/bad".encode()
    kafka.append(REGISTRY_TOPIC, [(bad, b"not json")])
    registry.write(DONE)  # a run's late write from its older copy
    with pytest.raises(RegistryRecordError):
        registry.read()[TOPIC]  # producers and apps of `in` stop and name the fix
    for cut in range(kafka.broker.end_offset(REGISTRY_TOPIC, 0) + 1):
        compact(kafka, cut=cut)
        with pytest.raises(RegistryRecordError):
            registry.read()[TOPIC]  # before the fix: DONE, the shrink forgotten, no error
    kafka.append(REGISTRY_TOPIC, [(bad, None)])  # the fix it names
    assert registry.read()[TOPIC] == SHRINKING
