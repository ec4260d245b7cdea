"""Snapshots on the real broker: scaling after retention deleted the start of the input, and
a processor that lost its disk coming back from its snapshot, exactly."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from framework.loader import load_app
from framework.runtime.loop import ProcessorRuntime
from statestore import processor_path
from statestore.snapshot_store import SnapshotStore
from tests.integration.harness import (
    TopicReader,
    WordWriter,
    counts_by_word,
    create_app,
    splitstate,
    unique,
    wait_for,
)
from tests.integration.test_catchup_retention import delete_before
from tests.integration.test_scaling import ScalingRun, scale_to, wait_for_generation

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"


def committed(kafka: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
        return {tp.partition: max(tp.offset, 0) for tp in found}
    finally:
        consumer.close()


def test_scaling_by_snapshot_needs_no_deleted_history(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """2 -> 3 -> 5 -> 2 under production, each scale after deleting every record the group
    had processed (as retention would): replay would be refused, snapshots serve, and every
    word's outputs are exactly 1..n."""
    run = ScalingRun(tmp_path, kafka_bootstrap, snapshots={"interval_seconds": 2})
    reader, group = run.reader, load_app(APP, run.config).config.app_id
    try:
        run.start_flowing()
        for processors in (3, 5, 2):
            done = committed(kafka_bootstrap, group, run.words, 8)
            for partition, offset in done.items():
                if offset > 0:
                    delete_before(kafka_admin, run.words, partition, offset)
            generation = scale_to(run.config, processors)
            wait_for_generation(run.config, generation, timeout=180)
            reader.poll(1.0)
        truth = run.finish()
        # operations: take one now, list them, read one
        taken = splitstate("snapshot", "take", APP, "--config", str(run.config), "--timeout", "60")
        assert taken.returncode == 0, taken.stderr
        assert sorted(line.split()[1] for line in taken.stdout.splitlines()) == ["0", "1"]
        listed = splitstate("snapshot", "list", APP, "--config", str(run.config))
        assert listed.returncode == 0, listed.stderr
        # the one taken, or (snapshots.keep: periodic ones taken since replaced it) newer ones
        newest: dict[str, int] = {}
        for line in listed.stdout.splitlines()[1:]:
            _, processor, snapshot, *_ = line.split()
            newest[processor] = max(newest.get(processor, 0), int(snapshot.split("-")[0]))
        for line in taken.stdout.splitlines():
            _, processor, snapshot, *_ = line.split()
            assert newest[processor] >= int(snapshot.split("-")[0]), (line, listed.stdout)
        dumped = splitstate(
            "state", "dump", "--snapshot", APP, "--config", str(run.config), "--processor", "0"
        )
        assert dumped.returncode == 0, dumped.stderr
        values = [json.loads(line) for line in dumped.stdout.splitlines()]
        counted = {v["key"]: v["value"] for v in values if v["store"] == "counts"}
        assert counted and all(0 < counted[w] <= truth[w] for w in counted)
    finally:
        status, log = run.stop()
    assert status == 0, log[-3000:]
    seen = counts_by_word(reader.records)
    for word, n in truth.items():
        assert sorted(seen[word]) == list(range(1, n + 1)), (word, n, seen[word][:5])
    assert sum(len(v) for v in seen.values()) == sum(truth.values())
    assert "gained from processor" in log and "out of its snapshot" in log
    assert "catching up by replay" not in log


def test_a_processor_that_lost_its_disk_comes_back_from_its_snapshot(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """SIGKILL the processor, delete its state directory and the history its snapshot
    covers: it restores the snapshot, rebuilds from it to the group's offsets without
    output, and goes on with exact counts and no output repeated."""
    words, counts = unique("words"), unique("counts")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("lost-disk"),
        inputs=[{"topic": words, "partitions": 2}],
        outputs=[{"topic": counts, "partitions": 1}],
        initial_processors=1,
        batch={"max_records": 200, "max_wait_ms": 50},
        # one at the start, one after 4000 more records, none by time
        snapshots={"interval_seconds": 3600, "interval_records": 4000},
    )
    app = load_app(APP, config)
    group = app.config.app_id
    store = SnapshotStore(app.config.snapshot_url, group)
    writer = WordWriter(kafka_bootstrap, words, 60)
    write, truth = writer.write, writer.truth

    def processed() -> int:
        return sum(committed(kafka_bootstrap, group, words, 2).values())

    def snapshot_offsets() -> int:
        newest = store.newest(0)
        return -1 if newest is None else sum(newest.offsets.values())

    write(5000, 0)
    command = [sys.executable, "-m", "framework.ops.cli", "run", APP, "--processor-id", "0"]
    with (tmp_path / "run.log").open("wb") as log:
        process = subprocess.Popen(
            [*command, "--config", str(config)], stdout=log, stderr=subprocess.STDOUT
        )
        try:
            wait_for(lambda: snapshot_offsets() >= 4000, 120, "a snapshot of 4000 records")
            wait_for(lambda: processed() == 5000, 120, "5000 records processed")
            covered = snapshot_offsets()
            write(2000, 5000)  # fewer than 4000 since that snapshot: no new one
            wait_for(lambda: processed() == 7000, 120, "2000 more records processed")
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(30)
    snapshot = store.newest(0)
    assert snapshot is not None and sum(snapshot.offsets.values()) == covered
    # what the snapshot covers is gone from Kafka: only the snapshot can serve it
    for (_, partition), offset in snapshot.offsets.items():
        delete_before(kafka_admin, words, partition, offset)
    status = splitstate("status", APP, "--config", str(config))
    assert status.returncode == 0, status.stderr
    assert f"processor 0: {snapshot.id}" in status.stdout
    assert "is close to offset" in status.stdout  # retention reached what a restore needs
    shutil.rmtree(processor_path(app.config.app_state_dir, 0))  # the disk is lost
    write(3000, 7000)
    back = ProcessorRuntime(app, 0).run(until=lambda stats: stats.records >= 3000)
    assert back.restored == 7000 - covered and back.records == 3000
    reader = TopicReader(kafka_bootstrap, counts, 1)
    try:
        reader.poll(3.0)
        seen = counts_by_word(reader.records)
    finally:
        reader.close()
    assert sum(len(v) for v in seen.values()) == 10_000  # none repeated, none missing
    for word, n in truth.items():
        assert sorted(seen[word]) == list(range(1, n + 1)), (word, n)


CRASHES = {
    # the source: mid-upload of a snapshot, then right after writing a manifest
    "source": "0:snapshot:copying,0:snapshot:written",
    # the receiver: after choosing the snapshot, mid-copy, with the bulk load recorded but
    # not ingested (the restart finishes it when it opens the state)
    "receiver": "2:transfer:found,2:transfer:copying,2:transfer:ingesting",
    # ... and after the ingest, before the catch-up's progress is written
    "receiver after the ingest": "2:transfer:ingested",
}


@pytest.mark.parametrize("faults", list(CRASHES.values()), ids=list(CRASHES))
def test_a_transfer_survives_a_crash_at_each_step(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, faults: str
) -> None:
    """Scale 2 -> 3 by snapshot under production while the source or the receiver is killed
    once at each step of the transfer: the scale completes and every word's counts are
    exactly 1..n (outputs may repeat after a kill, state never)."""
    monkeypatch.setenv("SPLITSTATE_FAULT", faults)
    run = ScalingRun(tmp_path, kafka_bootstrap, snapshots={"slice_bytes": 4096})
    try:
        run.start_flowing()
        wait_for_generation(run.config, scale_to(run.config, 3), timeout=180)
        truth = run.finish()
    finally:
        status, log = run.stop()
    assert status == 0, log[-3000:]
    for fault in faults.split(","):
        victim, point = fault.split(":", 1)
        marker = tmp_path / "state" / f".fault-{victim}-{point.replace(':', '-')}"
        assert marker.exists(), f"{fault} was never reached"
    victim = faults.split(":", 1)[0]
    assert log.count(f"processor {victim} exited with status -9; restarting") == len(
        faults.split(",")
    )
    seen = counts_by_word(run.reader.records)
    for word, n in truth.items():
        assert set(seen[word]) == set(range(1, n + 1)), (word, n, sorted(seen[word])[:5])
    assert "gains in generation 1 in bulk (waiting for snapshots" in log
