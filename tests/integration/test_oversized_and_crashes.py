"""Records Kafka or the process cannot take do not stop the processor (issue 12, defect 8).

An output larger than its topic accepts, or a dead letter larger than Kafka accepts, becomes a
(smaller) dead letter and the batch commits; a record that kills the process is dead-lettered
and skipped after ``crash_limit`` crashes.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.integration.harness import (
    Supervised,
    TopicReader,
    create_app,
    produce,
    splitstate,
    unique,
)

pytestmark = pytest.mark.integration

SIZES = "tests.integration.apps.sizes:app"


def sizes_app(tmp_path: Path, bootstrap: str, **fields: Any) -> tuple[Path, str, str, str]:
    """A config and topics for the sizes app: input, output (2 partitions each), dead letters."""
    topic, output, dead = unique("asks"), unique("padded"), unique("dead")
    config = create_app(
        tmp_path,
        bootstrap,
        SIZES,
        app_id=unique("sizes"),
        inputs=[{"topic": topic, "partitions": 2}],
        outputs=[{"topic": output, "partitions": 2}],
        initial_processors=1,
        dead_letter_topic=dead,
        **fields,
    )
    return config, topic, output, dead


def ask(pad: int = 0, die: bool = False) -> bytes:
    return json.dumps({"pad": pad, "die": die}).encode()


def small_records(prefix: str, count: int) -> list[tuple[bytes, bytes]]:
    return [(f"{prefix}-{i % 7}".encode(), ask(10)) for i in range(count)]


def letters_by_key(reader: TopicReader) -> dict[bytes | None, list[tuple[dict[str, Any], Any]]]:
    found: dict[bytes | None, list[tuple[dict[str, Any], Any]]] = {}
    for key, value, headers in reader.records:
        found.setdefault(key, []).append((dict(headers), value))
    return found


def outputs_seen(reader: TopicReader) -> Counter[tuple[str, int]]:
    """(key, n) of every output read (repeats allowed: outputs are at least once)."""
    seen: Counter[tuple[str, int]] = Counter()
    for _key, value, _headers in reader.records:
        data = json.loads(value or b"")
        seen[(data["key"], data["n"])] += 1
    return seen


def expected_outputs(records: list[tuple[bytes, bytes]]) -> set[tuple[str, int]]:
    counts: Counter[bytes] = Counter()
    expected = set()
    for key, _value in records:
        counts[key] += 1
        expected.add((key.decode(), counts[key]))
    return expected


GUARANTEES = pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])


@GUARANTEES
def test_an_output_too_large_for_its_topic_becomes_a_dead_letter(
    tmp_path: Path, kafka_bootstrap: str, kafka_admin: AdminClient, guarantee: str
) -> None:
    """Under exactly-once too: there the outputs are measured against the topic's limit
    before they are produced (a refusal would fail the whole transaction)."""
    config, topic, output, dead = sizes_app(
        tmp_path, kafka_bootstrap, processing_guarantee=guarantee
    )
    limit = ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", output, incremental_configs=[limit])
    for future in kafka_admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    before, after = small_records("before", 40), small_records("after", 40)
    big = [(b"big", ask(pad=5000)), (b"huge", ask(pad=1_100_000))]  # topic's, producer's limit
    produce(kafka_bootstrap, topic, before + big + after)
    runner = Supervised(SIZES, config, tmp_path / "state", tmp_path / "run.log")
    outputs = TopicReader(kafka_bootstrap, output, 2)
    letters = TopicReader(kafka_bootstrap, dead, 1)
    wanted = expected_outputs(before + after)
    try:
        outputs.wait_for(
            lambda r: wanted <= set(outputs_seen(r)), timeout=120, what="every small output"
        )
        letters.wait_for(lambda r: len(r.records) >= 2, timeout=60, what="the dead letters")
        letters.poll(2.0)
    finally:
        status = runner.stop()
        outputs.close()
        letters.close()
    assert status == 0, runner.output()[-3000:]
    assert set(outputs_seen(outputs)) == wanted  # nothing of the big ones
    assert set(letters_by_key(letters)) == {b"big", b"huge"}
    [(headers, value)] = letters_by_key(letters)[b"huge"]
    assert headers["splitstate.stage"] == b"output"
    error = headers["splitstate.error"].decode()
    assert "Message size too large" in error or "over the max.message.bytes 2000" in error
    [(headers, value)] = letters_by_key(letters)[b"big"]
    assert headers["splitstate.stage"] == b"output"
    reason = headers["splitstate.error"].decode()
    assert f"its output to topic '{output}'" in reason and "max.message.bytes" in reason
    assert "state change was kept" in reason
    assert headers["splitstate.topic"] == topic.encode()
    assert value == ask(pad=5000)  # the input record, whole (it is small)
    assert "exited with status" not in runner.output()


@GUARANTEES
def test_a_dead_letter_too_large_is_replaced_by_one_naming_the_record(
    tmp_path: Path, kafka_bootstrap: str, guarantee: str
) -> None:
    config, topic, output, dead = sizes_app(
        tmp_path, kafka_bootstrap, processing_guarantee=guarantee
    )
    before, after = small_records("before", 20), small_records("after", 20)
    huge = [(b"huge", b"\xff" * 999_900)]  # fits Kafka; its dead letter's headers do not
    produce(kafka_bootstrap, topic, before + huge + after)
    runner = Supervised(SIZES, config, tmp_path / "state", tmp_path / "run.log")
    outputs = TopicReader(kafka_bootstrap, output, 2)
    letters = TopicReader(kafka_bootstrap, dead, 1)
    wanted = expected_outputs(before + after)
    try:
        outputs.wait_for(lambda r: wanted <= set(outputs_seen(r)), timeout=120, what="every output")
        letters.wait_for(lambda r: len(r.records) >= 1, timeout=60, what="the dead letter")
    finally:
        status = runner.stop()
        outputs.close()
        letters.close()
    assert status == 0, runner.output()[-3000:]
    [(headers, value)] = letters_by_key(letters)[b"huge"]
    assert value is None
    assert headers["splitstate.stage"] == b"decode"
    partition, offset = headers["splitstate.partition"], headers["splitstate.offset"]
    reason = headers["splitstate.error"].decode()
    assert "Invalid JSON" in reason  # the original reason is kept
    assert "value and headers were dropped" in reason
    assert f"read it at {topic}[{partition.decode()}]@{offset.decode()}" in reason
    assert "exited with status" not in runner.output()


def test_a_record_that_kills_the_process_is_skipped_after_the_crash_limit(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    config, topic, output, dead = sizes_app(tmp_path, kafka_bootstrap)  # crash_limit 3
    before, after = small_records("before", 30), small_records("after", 30)
    produce(kafka_bootstrap, topic, [*before, (b"poison", ask(die=True)), *after])
    runner = Supervised(SIZES, config, tmp_path / "state", tmp_path / "run.log")
    outputs = TopicReader(kafka_bootstrap, output, 2)
    letters = TopicReader(kafka_bootstrap, dead, 1)
    wanted = expected_outputs(before + after)
    try:
        letters.wait_for(lambda r: len(r.records) >= 1, timeout=90, what="the dead letter")
        outputs.wait_for(lambda r: wanted <= set(outputs_seen(r)), timeout=60, what="every output")
    finally:
        status = runner.stop()
        outputs.close()
        letters.close()
    log = runner.output()
    assert status == 0, log[-3000:]
    # 3 crashes on the record alone, after at most one amid a batch (that names no record)
    assert log.count("processor 0 exited with status -9; restarting") in (3, 4), log[-3000:]
    # state changed exactly once per record: each key's counts are exactly 1..n
    assert set(outputs_seen(outputs)) == wanted
    [(headers, value)] = letters_by_key(letters)[b"poison"]
    assert headers["splitstate.stage"] == b"crash"
    assert headers["splitstate.error"].decode().startswith("killed the processor 3 times")
    assert value == ask(die=True)
    offset = int(headers["splitstate.offset"])
    partition = int(headers["splitstate.partition"])
    assert f"{topic}[{partition}]@{offset} (key b'poison') killed the processor 3 times" in log
    status_report = splitstate("status", SIZES, "--config", str(config))
    assert status_report.returncode == 0, status_report.stderr
    assert (
        f"processor 0 skipped {topic}[{partition}]@{offset}: it killed the processor 3 times"
        in status_report.stdout
    )
