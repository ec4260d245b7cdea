"""Ticks on the real broker (``framework.runtime.ticking``): a processor records the progress
of time in its input partitions, and everything that depends on it happens once, however
the state was built.

The app (``tests/integration/apps/sessions.py``) alerts once a key has been quiet for 1.5 s
of recorded processing time, and closes each key's event-time session window once its
partition's floor passes it (``time.idle_after`` 0.5 s); processors consider ticking every
0.2 s.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from framework.kafka import DeliveryError, KafkaIOError, KafkaProducer, Message
from framework.runtime.clients import transactional_id
from framework.runtime.loop import RuntimeStats
from framework.runtime.ticking import Tick, TickWriter
from framework.time.ticks import TICK_HEADER, is_tick_key
from statestore import processor_path
from tests.integration.apps.sessions import FAILING, GAP_MS
from tests.integration.compacted_reads import Read, read_topic
from tests.integration.harness import Supervised, TopicReader
from tests.integration.test_snapshots import committed
from tests.integration.ticks_world import (
    APP,
    PARTITIONS,
    TICK_SECONDS,
    TickWorld,
    each_once,
    everything_written,
)

pytestmark = pytest.mark.integration

KEYS = [f"user-{i}".encode() for i in range(8)]
PER_KEY = 3


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_a_quiet_key_is_alerted_once_within_a_few_tick_intervals(
    tmp_path: Path, kafka_bootstrap: str, guarantee: str
) -> None:
    world = TickWorld.create(tmp_path, kafka_bootstrap, processing_guarantee=guarantee)
    # the events are sent once the processor runs, then the keys go quiet
    stats = world.run_until_emitted(  # (the failing key: a session result, no alert)
        2 * len(KEYS) + 1,
        settle=5 * TICK_SECONDS,
        first=lambda: world.send([*KEYS, FAILING], PER_KEY),
    )
    emitted = [r for r in world.emitted() if r.key != FAILING]
    each_once(emitted, KEYS, PER_KEY)  # read_committed: each alert and session result once
    # the failing alert: one dead letter, stage timer, at the tick it fired at
    assert stats.dead_letters == 1
    [letter] = read_topic(kafka_bootstrap, f"{world.app_id}-dead-letters", 1)
    assert (letter.key, letter.headers["splitstate.stage"]) == (FAILING, b"timer")
    at = (int(letter.headers["splitstate.partition"]), int(letter.headers["splitstate.offset"]))
    assert at in {(r.partition, r.offset) for r in world.ticks()}
    anchors = quiet_timer_anchors(world.log())
    for record in emitted:
        if "alert" in json.loads(record.value or b""):
            due = anchors[record.key] + GAP_MS  # its quiet timer, by recorded wall time
            assert due <= record.timestamp <= due + 5000 * TICK_SECONDS, record
    # a few ticks where keys live, not one per interval: written only when something was
    # due there, and never while an earlier one was unread
    ticks = world.ticks()
    per_partition = {r.partition for r in ticks}
    assert per_partition == {r.partition for r in world.log() if r.key in KEYS}
    assert len(ticks) <= 3 * len(per_partition), ticks
    for tick in ticks:  # keyless, an empty value, floor, wall, the app, the history steps known
        assert (tick.key, tick.value) == (None, b"")
        header = json.loads(tick.headers[TICK_HEADER])
        assert set(header) == {"floor", "wall", "app", "steps"} and header["app"] == world.app_id
        assert header["steps"] == 0  # (the input never changed its partition count)


@pytest.mark.parametrize("compacted", [False, True], ids=["plain", "compacted"])
def test_a_lost_disk_is_rebuilt_with_the_ticks_and_nothing_is_emitted_again(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, compacted: bool
) -> None:
    world = TickWorld.create(tmp_path, kafka_bootstrap, kafka_admin, compacted=compacted)
    world.send(KEYS, PER_KEY)
    world.run_until_emitted(2 * len(KEYS))
    each_once(world.emitted(), KEYS, PER_KEY)
    live = world.state()
    ticks = world.ticks()
    assert ticks
    if compacted:  # a key of its own (Kafka refuses keyless records there), a value
        assert all(t.key is not None and is_tick_key(world.events, t.key) for t in ticks)
        assert all(t.value == b"" for t in ticks)  # (None would make it a tombstone)
    behind = committed(kafka_bootstrap, world.app_id, world.events, 2)
    below = sum(1 for r in world.log() if r.offset < behind[r.partition])
    assert below > len(KEYS) * PER_KEY  # the ticks too

    shutil.rmtree(processor_path(world.state_dir, 0))  # the disk is lost
    rebuilt = world.run(lambda stats: stats.restored >= below)
    assert (rebuilt.restored, rebuilt.outputs) == (below, 0)
    assert world.state() == live  # the ticks read again where they are: the same state
    each_once(world.emitted(), KEYS, PER_KEY)


@pytest.mark.parametrize("point", ["tick:written", "tick:read"])
def test_killed_right_after_a_tick_it_alerts_once_and_holds_what_a_run_would(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """Processor 0 is SIGKILLed right after the transaction holding its first tick
    (``tick:written``), or the first transaction of a batch that read one and so emitted
    alerts (``tick:read``), committed, before its state did; the supervisor restarts it,
    and it rebuilds what the group's offsets are ahead of its state without output."""
    monkeypatch.setenv("SPLITSTATE_FAULT", f"0:{point}")
    world = TickWorld.create(tmp_path, kafka_bootstrap)
    world.send(KEYS, PER_KEY)
    runner = Supervised(APP, world.config, world.state_dir, tmp_path / "run.log")
    reader = TopicReader(kafka_bootstrap, world.alerts, 1)
    try:
        reader.wait_for(lambda r: len(r.records) >= 2 * len(KEYS), 30, "every output")
        reader.poll(5 * TICK_SECONDS)
    finally:
        reader.close()
        status = runner.stop()
    log = runner.output()
    assert status == 0, log[-3000:]
    assert "processor 0 exited with status -9; restarting" in log, log[-3000:]
    each_once(world.emitted(), KEYS, PER_KEY)
    assert world.state() == world.uninterrupted()


def test_a_fenced_processor_cannot_write_a_tick(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newer producer of processor 0's transactional id starts (a newer instance of it, as
    on another machine); then the zombie reads the events. Their quiet timers wait for a tick
    to count from, so their keys are due at once: the zombie hands its tick to its producer
    inside the batch's transaction: fenced, nothing of it reaches the topic, and it stops."""
    world = TickWorld.create(tmp_path, kafka_bootstrap)
    handed: list[Tick] = []
    send = TickWriter.send

    def spied(
        writer: TickWriter,
        producer: KafkaProducer,
        ticks: Iterable[Tick],
        on_delivery: Callable[[DeliveryError | None, Message], None] | None = None,
    ) -> int:
        ticks = list(ticks)
        handed.extend(ticks)
        return send(writer, producer, ticks, on_delivery)

    monkeypatch.setattr(TickWriter, "send", spied)
    fencers: list[Producer] = []
    deadline = time.monotonic() + 30

    def until(_stats: RuntimeStats) -> bool:
        if not fencers:  # (its producer is open: the run's transactions are initialized)
            assert handed == []  # (nothing was due yet)
            fencer = Producer(  # the newer instance's producer: it fences this one's
                {
                    "bootstrap.servers": kafka_bootstrap,
                    "transactional.id": transactional_id(world.app_id, 0),
                }
            )
            fencer.init_transactions(30)
            fencers.append(fencer)
            world.send(KEYS, PER_KEY)
        return time.monotonic() > deadline

    try:
        with pytest.raises(KafkaIOError, match="fenced"):
            world.run(until)  # (it exits once its next transaction finds it fenced)
    finally:
        for fencer in fencers:
            fencer.close()
    assert fencers and handed  # fenced first, then it handed its tick(s) to its producer
    written = everything_written(kafka_bootstrap, world.events, PARTITIONS)  # even uncommitted
    assert sorted(key or b"" for key, _headers in written) == sorted(KEYS * PER_KEY)
    assert all(TICK_HEADER not in dict(headers) for _key, headers in written)
    assert world.emitted() == []  # no alert either


def quiet_timer_anchors(log: list[Read]) -> dict[bytes | None, int]:
    """Per key, the wall time its quiet timer counts from: ``set_wall_after`` at a record
    waits for the next tick applied to the key (the first tick after the key's last event in
    its partition) and counts from that tick's wall, or the event's time when later."""
    last: dict[bytes | None, Read] = {}
    for record in log:
        if record.key in KEYS:
            last[record.key] = record
    anchors = {}
    for key, event in last.items():
        walls = [
            orjson.loads(r.headers[TICK_HEADER])["wall"]
            for r in log
            if TICK_HEADER in r.headers
            and r.partition == event.partition
            and r.offset > event.offset
        ]
        anchors[key] = max(event.timestamp, walls[0]) if walls else event.timestamp
    return anchors
