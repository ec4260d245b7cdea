"""Input written by a plain producer (confluent-kafka's default partitioner, no splitstate
headers: any other team's service) on the real broker. Where its partitioner put a key on a
partition linear hashing does not place it, the processor dead-letters exactly those records
(stage placement) and keeps only placed records in its state; the same records are skipped
when lost state is rebuilt, and through a scale 2 -> 3 no key's state is lost or held by two
processors (before the fix they were processed where they landed, and a scale lost or split
their keys' state)."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from framework.loader import load_app
from framework.runtime.loop import ProcessorRuntime
from rebalance import bucket, key_hash
from statestore import ProcessorDatabase, processor_path
from tests.integration.harness import (
    Supervised,
    TopicReader,
    counts_by_word,
    create_app,
    produce,
    splitstate,
    unique,
)
from tests.integration.test_scaling import scale_to, wait_for_generation

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"
PARTITIONS = 4

Where = tuple[int, int]  # (partition, offset)


class Input:
    """Writes words to the input, through ``SplitstateProducer`` and through a plain
    producer; remembers how many records of each word are placed, and where the misplaced
    ones are."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.placed: Counter[str] = Counter()
        self.misplaced: set[Where] = set()

    def write(self, words: list[str], plain: list[str]) -> None:
        """``words`` through ``SplitstateProducer``, then ``plain`` through a plain one."""
        produce(self.bootstrap, self.topic, ((w.encode(), b"") for w in words))
        self.placed.update(words)
        landed: list[Message] = []

        def delivered(error: KafkaError | None, message: Message) -> None:
            assert error is None, error
            landed.append(message)

        producer = Producer({"bootstrap.servers": self.bootstrap})
        for word in plain:
            producer.produce(self.topic, b"", word.encode(), on_delivery=delivered)
        assert producer.flush(30) == 0
        assert len(landed) == len(plain)
        for message in landed:
            key, partition, offset = message.key(), message.partition(), message.offset()
            assert key is not None and partition is not None and offset is not None
            if partition == bucket(key_hash(key), PARTITIONS, PARTITIONS):
                self.placed[key.decode()] += 1
            else:
                self.misplaced.add((partition, offset))

    @property
    def total(self) -> int:
        """Records written."""
        return sum(self.placed.values()) + len(self.misplaced)


def words(count: int, first: int = 0) -> list[str]:
    return [f"w{(first + i) % 300:03d}" for i in range(count)]


def dead_letters(reader: TopicReader, topic: str) -> list[tuple[str, Where]]:
    """``(stage, (partition, offset))`` of each dead letter of ``topic``."""
    found = []
    for _key, _value, headers in reader.records:
        fields = dict(headers)
        assert fields["splitstate.topic"] == topic.encode()
        where = (int(fields["splitstate.partition"]), int(fields["splitstate.offset"]))
        found.append((fields["splitstate.stage"].decode(), where))
    return found


def state_counts(state_dir: Path, processor: int) -> dict[str, int]:
    """Each word's count in processor ``processor``'s state."""
    with ProcessorDatabase.open_read_only(processor_path(state_dir, processor)) as database:
        return {key.decode(): int(count) for key, count in database.items("counts")}


def test_misplaced_records_are_dead_letters_live_and_skipped_in_a_rebuild(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    topic, dead = unique("words"), unique("dead")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("plain-input"),
        inputs=[{"topic": topic, "partitions": PARTITIONS}],
        outputs=[{"topic": unique("counts"), "partitions": PARTITIONS}],
        initial_processors=1,
        dead_letter_topic=dead,
    )
    written = Input(kafka_bootstrap, topic)
    written.write(words(600), plain=words(600, first=17))
    assert written.misplaced and len(written.placed) > 100
    app = load_app(APP, config)
    state_dir = app.config.app_state_dir
    live = ProcessorRuntime(app, 0).run(until=lambda stats: stats.records >= written.total)
    assert live.dead_letters == len(written.misplaced)
    assert state_counts(state_dir, 0) == dict(written.placed)
    letters = TopicReader(kafka_bootstrap, dead, 1)
    try:
        letters.wait_for(
            lambda r: len(r.records) >= len(written.misplaced), timeout=30, what="dead letters"
        )
        found = dead_letters(letters, topic)
        assert sorted(found) == sorted(("placement", where) for where in written.misplaced)

        shutil.rmtree(processor_path(state_dir, 0))  # the disk is lost: rebuilt in restore mode
        rebuilt = ProcessorRuntime(app, 0).run(until=lambda s: s.restored >= written.total)
        assert (rebuilt.records, rebuilt.outputs, rebuilt.dead_letters) == (0, 0, 0)
        assert state_counts(state_dir, 0) == dict(written.placed)
        letters.poll(2.0)
        assert len(letters.records) == len(written.misplaced)  # none written again
    finally:
        letters.close()


@pytest.mark.parametrize("bootstrap", ["snapshot", "replay"])
def test_through_a_scale_no_key_is_lost_or_split(
    tmp_path: Path, kafka_bootstrap: str, bootstrap: str
) -> None:
    topic, counts, dead = unique("words"), unique("counts"), unique("dead")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("plain-scale"),
        inputs=[{"topic": topic, "partitions": PARTITIONS}],
        outputs=[{"topic": counts, "partitions": PARTITIONS}],
        initial_processors=2,
        processors=2,
        dead_letter_topic=dead,
        bootstrap=bootstrap,
        scaling={"ready_lag": 100},
    )
    written = Input(kafka_bootstrap, topic)
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    outputs = TopicReader(kafka_bootstrap, counts, PARTITIONS)
    letters = TopicReader(kafka_bootstrap, dead, 1)

    def caught_up() -> None:
        placed = sum(written.placed.values())
        outputs.wait_for(lambda r: len(r.records) >= placed, timeout=120, what="every output")
        letters.wait_for(
            lambda r: len(r.records) >= len(written.misplaced), timeout=60, what="dead letters"
        )

    try:
        written.write(words(900), plain=words(900, first=40))
        caught_up()
        generation = scale_to(config, 3)
        written.write(words(600, first=7), plain=words(600, first=90))  # during the scale
        wait_for_generation(config, generation, timeout=180)
        written.write(words(600, first=150), plain=words(600, first=210))
        caught_up()
        time.sleep(2)
        outputs.poll(2.0)
        letters.poll(1.0)
    finally:
        status = runner.stop()
        outputs.close()
        letters.close()
    log = runner.output()
    assert status == 0, log[-3000:]

    seen = counts_by_word(outputs.records)
    assert set(seen) == set(written.placed)
    for word, n in written.placed.items():
        assert sorted(seen[word]) == list(range(1, n + 1)), (word, n, seen[word][:8])
    assert sorted(dead_letters(letters, topic)) == sorted(
        ("placement", where) for where in written.misplaced
    )

    state_dir = load_app(APP, config).config.app_state_dir
    held: dict[str, dict[int, Any]] = {}
    for processor in range(3):
        for word, count in state_counts(state_dir, processor).items():
            held.setdefault(word, {})[processor] = count
    for word, n in written.placed.items():
        owner = bucket(key_hash(word.encode()), 2, 3)
        assert held[word] == {owner: n}, (word, n, held[word])

    shown = splitstate("status", APP, "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    total = len(written.misplaced)
    assert f"warning: {total} records without a splitstate.count header dead-lettered" in (
        shown.stdout
    ), shown.stdout
    assert "Kafka's default partitioner" in shown.stdout
    assert "dead-lettered" in log and "does not place keys by linear hashing" in log
