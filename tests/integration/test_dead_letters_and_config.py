"""Bad records land in the dead-letter topic; bad configs fail fast with the fix."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.conftest import TopicFactory
from tests.integration.harness import (
    Supervised,
    TopicReader,
    counts_by_word,
    produce,
    splitstate,
    unique,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.integration

BALANCES = "examples.balances.app:app"
WORDCOUNT = "examples.wordcount.app:app"


def test_bad_records_go_to_dead_letters_and_processing_continues(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    transactions, balances, dead = unique("tx"), unique("balances"), unique("dead")
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=unique("balances"),
        inputs=[{"topic": transactions, "partitions": 2}],
        outputs=[{"topic": balances, "partitions": 2}],
        initial_processors=1,
        dead_letter_topic=dead,
    )
    assert splitstate("topics", "create", BALANCES, "--config", str(config)).returncode == 0

    def tx(kind: str, amount: int) -> bytes:
        return json.dumps({"account": "acc-1", "kind": kind, "amount": amount}).encode()

    produce(
        kafka_bootstrap,
        transactions,
        [
            (b"acc-1", tx("deposit", 100)),
            (b"acc-1", b"{not json"),
            (b"acc-1", tx("deposit", 0)),
            (b"acc-1", tx("withdrawal", 500)),
            (b"acc-1", tx("withdrawal", 30)),
        ],
    )
    runner = Supervised(BALANCES, config, tmp_path / "state", tmp_path / "run.log")
    outputs = TopicReader(kafka_bootstrap, balances, 2)
    letters = TopicReader(kafka_bootstrap, dead, 1)
    try:
        outputs.wait_for(lambda r: len(r.records) >= 2, timeout=120, what="two balances")
        letters.wait_for(lambda r: len(r.records) >= 3, timeout=60, what="three dead letters")
    finally:
        assert runner.stop() == 0, runner.output()[-2000:]
        outputs.close()
        letters.close()
    final = json.loads(outputs.records[-1][1] or b"")
    assert final == {"account": "acc-1", "balance": 70, "transactions": 2}
    reasons = []
    for key, value, headers in letters.records:
        fields = dict(headers)
        assert key == b"acc-1"
        assert fields["splitstate.topic"] == transactions.encode()
        reasons.append((fields["splitstate.stage"], fields["splitstate.error"].decode(), value))
    assert reasons[0][0] == b"decode" and "Invalid JSON" in reasons[0][1]
    assert reasons[0][2] == b"{not json"
    assert reasons[1][0] == b"decode" and "greater than 0" in reasons[1][1]
    assert reasons[2][0] == b"processor" and "InsufficientFundsError" in reasons[2][1]


def run_once(config: Path, app: str = WORDCOUNT) -> tuple[int, str]:
    result = splitstate("run", app, "--config", str(config), "--processor-id", "0", timeout=60)
    return result.returncode, result.stderr


def test_config_errors_fail_fast(
    tmp_path: Path, kafka_bootstrap: str, topic_factory: TopicFactory, kafka_admin: AdminClient
) -> None:
    def config(name: str, **fields: object) -> Path:
        directory = tmp_path / name
        directory.mkdir()
        return write_config(directory, kafka_bootstrap, app_id=unique(name), **fields)

    missing = config(
        "missing",
        inputs=[{"topic": unique("nope")}],
        outputs=[{"topic": unique("nope-out")}],
        initial_processors=1,
        auto_create_topics=False,
    )
    status, error = run_once(missing)
    assert status == 2
    assert "do not exist. Fix: `splitstate topics create" in error

    words, out = topic_factory(partitions=6), topic_factory(partitions=6)
    not_power = config(
        "power", inputs=[{"topic": words}], outputs=[{"topic": out}], initial_processors=4
    )
    status, error = run_once(not_power)
    assert status == 2
    assert "initial_partitions (6) must equal initial_processors (4) times a power of two" in error

    words8, out8 = topic_factory(partitions=8), topic_factory(partitions=8)
    too_many = config(
        "many",
        inputs=[{"topic": words8}],
        outputs=[{"topic": out8}],
        initial_processors=2,
        processors=9,
    )
    status, error = run_once(too_many)
    assert status == 2
    assert "processors (9) cannot exceed the input partitions (8)" in error

    first = config(
        "contradict", inputs=[{"topic": words8}], outputs=[{"topic": out8}], initial_processors=2
    )
    runner = Supervised(WORDCOUNT, first, first.parent / "state", first.parent / "run.log")
    try:
        deadline = time.monotonic() + 60
        while "processor 0 of" not in runner.output() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        assert runner.stop() == 0, runner.output()[-2000:]
    changed = first.read_text().replace("initial_processors: 2", "initial_processors: 1")
    first.write_text(changed)
    status, error = run_once(first)
    assert status == 2
    assert "initial_processors is 1 in the config but app" in error
    assert "was started with 2 (its control log). It can never change." in error
    assert "Traceback" not in error


def test_a_start_creates_the_missing_topics_with_valid_partition_counts(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient
) -> None:
    """auto_create_topics (default on): the first start makes the inputs (initial_processors
    partitions when not given, every record kept) and outputs, then processes as usual."""
    words, counts = unique("auto-words"), unique("auto-counts")
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=unique("auto"),
        inputs=[{"topic": words}],
        outputs=[{"topic": counts, "partitions": 3}],
        initial_processors=2,
    )
    runner = Supervised(WORDCOUNT, config, tmp_path / "state", tmp_path / "run.log")
    try:
        wait_for(
            lambda: (
                words in kafka_admin.list_topics(timeout=10).topics
                and "partitions [" in runner.output()
            ),
            60,
            "the input topic created and the processors running",
        )
        produce(kafka_bootstrap, words, [(b"pear", b""), (b"pear", b"")])
        reader = TopicReader(kafka_bootstrap, counts, 3)
        try:
            reader.wait_for(lambda r: len(r.records) >= 2, timeout=60, what="2 counts")
        finally:
            reader.close()
    finally:
        assert runner.stop() == 0, runner.output()[-3000:]
    topics = kafka_admin.list_topics(timeout=10).topics
    assert len(topics[words].partitions) == 2 and len(topics[counts].partitions) == 3
    assert "created topic" in runner.output()
    assert counts_by_word(reader.records) == {"pear": [1, 2]}
