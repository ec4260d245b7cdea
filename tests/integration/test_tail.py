"""``splitstate tail``: a topic's records decoded, read_committed, escaped; an app's outputs and
dead letters by the app's name (issue 37: a new user had no way to see what an app wrote)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from framework.records import DeadLetter
from tests.conftest import TopicFactory
from tests.integration.harness import create_app, produce, splitstate, unique
from tests.integration.raw_records import produce_raw

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"


def test_a_topics_records_decoded_and_escaped(tmp_path: Path, kafka_bootstrap: str) -> None:
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("tail"),
        initial_processors=1,
        inputs=[{"topic": unique("words"), "partitions": 2}],
        outputs=[{"topic": unique("counts"), "partitions": 2}],
    )
    settings = yaml.safe_load(config.read_text())
    output, dead_letters = settings["outputs"][0]["topic"], f"{settings['app_id']}-dead-letters"
    produce(kafka_bootstrap, output, [(b"apple", b'{"word": "apple", "count": 1}')])
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    letter = DeadLetter("words", 1, 7, b"k", b"\x1b[2J{not json", (), "decode", "Invalid JSON")
    headers: list[tuple[str, str | bytes | None]] = list(letter.kafka_headers())
    producer.produce(dead_letters, letter.value, letter.key, headers=headers)
    assert producer.flush(30) == 0

    by_topic = splitstate(
        "tail",
        output,
        "--from-beginning",
        "--max-records",
        "1",
        "--bootstrap-servers",
        kafka_bootstrap,
    )
    assert by_topic.returncode == 0, by_topic.stderr
    assert by_topic.stdout.endswith('key \'apple\': {"word":"apple","count":1}\n'), by_topic.stdout
    by_app = splitstate(
        "tail",
        APP,
        "--config",
        str(config),
        "--dead-letters",
        "--from-beginning",
        "--max-records",
        "1",
    )
    assert by_app.returncode == 0, by_app.stderr
    line = by_app.stdout.strip()
    assert "dead letter, stage decode, of words[1]@7 key 'k': Invalid JSON" in line, line
    assert "\x1b" not in line and "\\x1b[2J{not json" in line, line  # escaped, not run


def test_a_missing_topic_and_a_wrong_app_topic_are_named(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    missing = splitstate(
        "tail", unique("nothing"), "--idle-seconds", "1", "--bootstrap-servers", kafka_bootstrap
    )
    assert missing.returncode == 2 and "there is no topic" in missing.stderr, missing.stderr
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("tail"),
        initial_processors=1,
        inputs=[{"topic": unique("words")}],
        outputs=[{"topic": unique("counts")}],
    )
    wrong = splitstate("tail", APP, "--config", str(config), "--topic", "typo")
    assert wrong.returncode == 2 and "writes no topic 'typo'" in wrong.stderr, wrong.stderr


def test_a_header_name_that_is_not_text_is_shown_not_fatal(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Anyone who can write to a topic could kill `tail` (SIGSEGV in confluent-kafka's
    headers()) with a header name that is not UTF-8; it is shown as unreadable, and tail goes
    on to the next record."""
    topic = topic_factory(partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b"1", b"before", partition=0)
    assert producer.flush(30) == 0
    produce_raw(kafka_bootstrap, topic, 0, key=b"k", value=b"2", headers=[(b"\xff\xfe", b"x")])
    producer.produce(topic, b"3", b"after", partition=0)
    assert producer.flush(30) == 0
    tailed = splitstate(
        "tail",
        topic,
        "--from-beginning",
        "--max-records",
        "3",
        "--idle-seconds",
        "30",
        "--bootstrap-servers",
        kafka_bootstrap,
    )
    assert tailed.returncode == 0, (tailed.returncode, tailed.stderr)
    lines = tailed.stdout.splitlines()
    assert len(lines) == 3, tailed.stdout
    assert "key 'k'" in lines[1] and "headers unreadable" in lines[1], lines[1]
    assert "key 'after'" in lines[2], lines[2]
    # `splitstate tail ... | head -c 1`: the reader goes away while tail writes (more than a
    # pipe holds); tail ends quietly
    many = topic_factory(partitions=1)
    for index in range(2000):
        producer.produce(many, b"v" * 100, f"key-{index}".encode(), partition=0)
    assert producer.flush(30) == 0
    command = [sys.executable, "-m", "framework.ops.cli", "tail", many, "--from-beginning"]
    options = ["--max-records", "2000", "--bootstrap-servers", kafka_bootstrap]
    with subprocess.Popen(
        [*command, *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as piped:
        assert piped.stdout is not None and piped.stderr is not None
        assert piped.stdout.read(1) == many[:1].encode()
        piped.stdout.close()  # as `head -c 1` does
        error = piped.stderr.read().decode()
        assert piped.wait(timeout=60) == 0, error
    assert "Traceback" not in error and "BrokenPipe" not in error, error


def test_tail_follows_from_the_end_and_reads_partitions_the_topic_gains(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """By default tail shows only what is written after it starts, and it reads the
    partitions the topic gains while it runs (issue 37: neither was tested; new partitions
    were never read)."""
    topic = topic_factory(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b"before", b"old", partition=0)
    assert producer.flush(30) == 0
    command = [sys.executable, "-m", "framework.ops.cli", "tail", topic]
    options = ["--max-records", "3", "--idle-seconds", "120", "--bootstrap-servers"]
    with subprocess.Popen(
        [*command, *options, kafka_bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as tail:
        assert tail.stdout is not None and tail.stderr is not None
        assert tail.stderr.readline().startswith(f"reading {topic} (2 partitions)")
        producer.produce(topic, b"after-0", b"new", partition=0)
        producer.produce(topic, b"after-1", b"new", partition=1)
        assert producer.flush(30) == 0
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
        grown = Producer(  # (a new producer: one that knows the topic may not see it grow)
            {"bootstrap.servers": kafka_bootstrap, "topic.metadata.refresh.interval.ms": 500}
        )
        grown.produce(topic, b"grown", b"new", partition=2)
        assert grown.flush(60) == 0
        out, error = tail.communicate(timeout=120)
    assert tail.returncode == 0, error
    lines = out.splitlines()
    assert sorted(line.split(":")[0] for line in lines) == [
        f"{topic}[0]@1 key 'new'",
        f"{topic}[1]@0 key 'new'",
        f"{topic}[2]@0 key 'new'",
    ], out
    assert all(line.endswith(("'after-0'", "'after-1'", "'grown'")) for line in lines), out
