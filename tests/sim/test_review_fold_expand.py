"""Review of ``expand`` going on from the entry the registry kept (``expand_writes``): runs of
the same change racing on the in-memory Kafka, killed between two of their lines, and what the
app's control-log hold and the registry's records are left as. Each test failed before the
finding it names was fixed."""

from __future__ import annotations

import random
from typing import Any

import pytest

from framework.coordination.registry import REGISTRY_TOPIC, TopicEntry, TopicRegistry
from framework.growth import expand as expand_module
from framework.growth.expand import expand_topic
from framework.growth.expand_writes import recorded_meanwhile
from tests.sim.test_shrink_command import TOPIC, World, new_world


class Killed(BaseException):
    """The process of a run of ``expand`` ended here (not an error it could handle)."""


class _Cleaner(random.Random):
    """The log cleaner's draws: everything below the key's last record cleanable."""

    def randint(self, a: int, b: int) -> int:
        return b

    def random(self) -> float:
        return 1.0


def compact_registry(world: World) -> None:
    world.kafka.broker.compact(REGISTRY_TOPIC, _Cleaner(0))


# fixed: review-fold finding 2: a run killed between its rejected write and its rewrite of the
# kept entry leaves the rejected record last; running expand again writes nothing (nothing to
# do), so compaction makes the rejected record the entry
def test_a_rerun_after_a_kill_between_a_rejected_write_and_its_rewrite_leaves_the_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = new_world()
    world.expand(8, stop_after="recorded")  # run A recorded the growth, then was killed
    real_meanwhile, real_write = recorded_meanwhile, TopicRegistry.write
    raced: list[bool] = []

    def meanwhile(registry: TopicRegistry, topic: str, reached: tuple[int, int]) -> Any:
        found = real_meanwhile(registry, topic, reached)
        if reached == (2, 2) and not raced:  # run B measured its fence ends and checked
            raced.append(True)
            world.expand(8)  # A run again meanwhile: fenced, marked, recorded, released
            monkeypatch.setattr(TopicRegistry, "write", killing)
        return found

    def killing(registry: TopicRegistry, entry: TopicEntry) -> None:
        real_write(registry, entry)  # B's fence ends: not kept (the growth is done)
        monkeypatch.setattr(TopicRegistry, "write", real_write)
        raise Killed

    monkeypatch.setattr("framework.growth.expand.recorded_meanwhile", meanwhile)
    with pytest.raises(Killed):
        world.expand(8)  # run B
    done = world.entry()
    assert done.growth is None and done.history.counts == (4, 8)  # the fold keeps A's
    world.lines.clear()
    assert world.expand(8) == done  # the operator runs it again, as told after a crash
    assert world.lines == ["in already has 8 partitions; nothing to do"]
    compact_registry(world)
    assert world.entry() == done  # before the fix: in progress again, its thresholds gone


# fixed: review-fold finding 3: a stale run whose _mark adopts a later change (the registry went
# past it) releases its hold, a growth_done of the same topic and count, which ends the hold of
# a later run of the same count
def test_a_stale_run_does_not_release_the_hold_of_a_later_change_to_the_same_count() -> None:
    world = new_world()
    world.expand(8, stop_after="fenced")  # run A: held, recorded, fenced; then killed
    raced: list[bool] = []

    def report(line: str) -> None:  # run B's lines
        world.lines.append(line)
        if line.startswith("marker for partition") and not raced:
            raced.append(True)  # B wrote its first marker; then it is slow, meanwhile:
            world.expand(8)  # A run again finishes the growth and releases the log
            world.expand(4)  # the operator shrinks back to 4 (held and released)
            world.expand(8, stop_after="recorded")  # and grows to 8 again: held, recorded

    entry = expand_topic(world.kafka, TOPIC, 8, control=world.control, report=report)
    assert raced
    assert entry.history.counts == (4, 8, 4, 8) and entry.growth is not None
    assert "the markers of in were recorded by another run" in world.lines
    held = world.control.read().growth
    assert held is not None  # before the fix: B's growth_done released the third change's hold


# fixed: review-fold finding 5 (older than the fold): a run that finds its change done by
# another run stops without releasing the hold, which the other run, killed before its release,
# left held
def test_a_run_that_finds_its_change_done_by_another_run_releases_the_hold() -> None:
    world = new_world()
    world.expand(8, stop_after="recorded")  # run A recorded the growth, then was killed

    def wait(seconds: float) -> None:  # run B's fence wait; meanwhile A, run again,
        world.clock.sleep(seconds)  # finishes the growth and is killed before its release
        world.expand(8, stop_after="unreleased")

    entry = expand_topic(
        world.kafka, TOPIC, 8, control=world.control, report=world.lines.append, wait=wait
    )
    assert entry.growth is None and entry.history.counts == (4, 8)  # B: done, exit 0
    assert world.control.read().growth is None  # before the fix: scales refused until a third run


# fixed: review-fold finding 6 (older than the fold): a growth's recorded_ms is taken before the
# admin call of is_compacted and the registry write; the fence counted from it is short by
# however long they take beyond the 1 s margin
def test_the_fence_counts_from_no_earlier_than_the_count_could_be_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = new_world()
    configs = world.kafka.topic_configs

    def slow(topics: Any) -> Any:  # a slow admin call (a broker under load): 5 s
        world.clock.sleep(5.0)
        return configs(topics)

    monkeypatch.setattr(world.kafka, "topic_configs", slow)
    entry = world.expand(8, stop_after="recorded")
    assert entry.growth is not None
    stored, _copy = [  # (the record, and its copy under the topic's name)
        r
        for r in world.kafka.broker.records(REGISTRY_TOPIC, 0)
        if r.value is not None and b'"recorded_ms"' in r.value
    ]
    # a producer whose read began just before the count landed places keys with 4
    # partitions until that read + lease_ms; its record lands by + delivery_timeout_ms, so
    # the fence (recorded_ms + lease + delivery timeout + 1 s) must not end before that
    assert stored.timestamp_ms - entry.growth.recorded_ms <= expand_module._MARGIN_MS
