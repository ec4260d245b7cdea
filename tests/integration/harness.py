"""Helpers to run apps as a user would: config files, `splitstate run`, producing, reading."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from framework.producer import SplitstateProducer


def unique(prefix: str) -> str:
    """A name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def write_config(directory: Path, kafka: str, **fields: Any) -> Path:
    """Write an app config YAML with ``fields`` (state_dir defaults into ``directory``)."""
    data: dict[str, Any] = {
        "kafka": {"bootstrap_servers": kafka},
        "state_dir": str(directory / "state"),
        "batch": {"max_records": 500, "max_wait_ms": 50},
        **fields,
    }
    path = directory / f"{data['app_id']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def create_app(directory: Path, kafka: str, app: str, **fields: Any) -> Path:
    """Write the app's config (``write_config``) and create its topics as a user would
    (`splitstate topics create`); returns the config file."""
    config = write_config(directory, kafka, **fields)
    created = splitstate("topics", "create", app, "--config", str(config))
    assert created.returncode == 0, created.stderr
    return config


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until it holds, or fail saying ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def splitstate(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the CLI and wait for it."""
    return subprocess.run(
        [sys.executable, "-m", "framework.ops.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class Supervised:
    """`splitstate run APP --all --config FILE` in the background."""

    def __init__(self, app: str, config: Path, state_dir: Path, log: Path) -> None:
        self.state_dir = state_dir
        self.log = log
        self._log_file = log.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "framework.ops.cli",
                "run",
                app,
                "--all",
                "--config",
                str(config),
            ],
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )

    def pids(self) -> dict[int, int]:
        """Processor id -> pid of the running children."""
        try:
            data = json.loads((self.state_dir / "supervisor.json").read_text())
        except (OSError, ValueError):
            return {}
        return {int(j): int(pid) for j, pid in data["processors"].items()}

    def stop(self, timeout: float = 90) -> int:
        """SIGTERM and wait; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self._log_file.close()

    def output(self) -> str:
        """What the supervisor and processors logged."""
        return self.log.read_text(errors="replace")


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes, bytes | None]]) -> int:
    """Produce keyed records with the linear-hash producer; returns how many."""
    producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
    count = 0
    for key, value in records:
        producer.produce(topic, key, value)
        count += 1
        if count % 5000 == 0:
            producer.poll(0)
    assert producer.close(60) == 0
    return count


def consume_ready(consumer: Consumer, most: int, timeout: float) -> list[Message]:
    """Up to ``most`` messages, returned as soon as one is there: the first within ``timeout``,
    then what the client already holds (``Consumer.consume`` waits out its whole timeout for a
    batch of ``most`` to fill: 0.5 s at each read of a topic smaller than that)."""
    first = consumer.poll(timeout)
    if first is None:
        return []
    return [first, *consumer.consume(num_messages=most - 1, timeout=0)]


class TopicReader:
    """Reads a topic from its beginning, incrementally, across all its partitions."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique("reader"),
                "enable.auto.commit": False,
                "isolation.level": "read_committed",  # what exactly-once promises to readers
            }
        )
        self.consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        )
        self.records: list[tuple[bytes | None, bytes | None, Any]] = []

    def poll(self, seconds: float = 1.0) -> int:
        """Read what arrived within ``seconds``; returns how many records."""
        new = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            batch = self.consumer.consume(num_messages=5000, timeout=0.2)
            for message in batch:
                if message.error() is None:
                    self.records.append((message.key(), message.value(), message.headers() or []))
                    new += 1
            if not batch and new:
                break
        return new

    def wait_for(self, predicate: Callable[[TopicReader], bool], timeout: float, what: str) -> None:
        """Poll until ``predicate(self)`` holds, or fail saying ``what`` was awaited."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll(1.0)
            if predicate(self):
                return
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")

    def close(self) -> None:
        """Close the consumer."""
        self.consumer.close()


def counts_by_word(
    records: Iterable[tuple[bytes | None, bytes | None, Any]],
) -> dict[str, list[int]]:
    """Wordcount outputs grouped by word, in the order read."""
    seen: dict[str, list[int]] = {}
    for _key, value, _headers in records:
        assert value is not None
        data = json.loads(value)
        seen.setdefault(data["word"], []).append(data["count"])
    return seen


class WordWriter:
    """Writes the words ``w0``..``w<vocabulary - 1>`` in turn to a topic, and counts them."""

    def __init__(self, bootstrap: str, topic: str, vocabulary: int) -> None:
        self.bootstrap, self.topic, self.vocabulary = bootstrap, topic, vocabulary
        #: how often each word was written
        self.truth: Counter[str] = Counter()

    def write(self, count: int, first: int) -> None:
        """Write ``count`` words, the first being word number ``first`` (mod the vocabulary)."""
        batch = [f"w{(first + i) % self.vocabulary}" for i in range(count)]
        produce(self.bootstrap, self.topic, ((w.encode(), b"") for w in batch))
        self.truth.update(batch)
