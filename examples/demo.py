"""The demo behind `make demo`: wordcount on a local broker, scaled from 2 to 3 processors live.

It starts a Kafka broker in a temporary directory, creates wordcount's topics (8 partitions),
writes 30,000 words, runs wordcount with 2 processors under the local supervisor, then keeps
writing words while it scales to 3 processors (`splitstate scale`: the new processor catches
up, the old owner hands two partitions over at an exact offset). It checks that every word's
outputs are exactly 1, 2, ..., n (no count lost or repeated across the handoff), prints the
top words and `splitstate status`, and stops everything it started.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from framework import SplitstateProducer
from framework.ops.broker import LocalBroker

APP = "examples.wordcount.app:app"
SENTENCE = (
    "the quick brown fox jumps over the lazy dog while the cat sleeps and the bird sings "
    "a song of state and streams of keys that never move between processors"
)
RECORDS = 30_000


def splitstate(*args: str) -> subprocess.CompletedProcess[str]:
    """Run a splitstate command, showing what it printed."""
    print(f"$ splitstate {' '.join(args)}", flush=True)
    result = subprocess.run(
        [sys.executable, "-m", "framework.ops.cli", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    print(result.stdout, end="", flush=True)
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr)
        raise SystemExit(result.returncode)
    return result


def main() -> None:
    """Run the demo."""
    with tempfile.TemporaryDirectory(prefix="splitstate-demo-") as scratch:
        broker = LocalBroker(Path(scratch) / "broker")
        print("== starting a local Kafka broker", flush=True)
        info = broker.start()
        print(f"bootstrap.servers={info.bootstrap_servers}\n", flush=True)
        os.environ["SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS"] = info.bootstrap_servers
        os.environ["SPLITSTATE_STATE_DIR"] = str(Path(scratch) / "state")
        try:
            run_wordcount(info.bootstrap_servers, Path(scratch))
        finally:
            broker.stop()
            print("\n== broker stopped; everything the demo started is gone", flush=True)


def run_wordcount(bootstrap: str, scratch: Path) -> None:
    """Create topics, produce words, run the app, scale it live, check and show the results."""
    print("== creating wordcount's topics", flush=True)
    splitstate("topics", "create", APP)

    rng = random.Random(42)
    vocabulary = SENTENCE.split()
    truth: Counter[str] = Counter()
    producer = SplitstateProducer({"bootstrap.servers": bootstrap}, ["words"])

    def write(count: int) -> None:
        words = [rng.choice(vocabulary) for _ in range(count)]
        for word in words:
            producer.produce("words", word.encode(), b"")
        producer.flush()
        truth.update(words)

    try:
        write(RECORDS)
        print(f"\n== produced {RECORDS} words ({len(truth)} distinct) to 'words'", flush=True)
        reader = CountReader(bootstrap)
        try:
            run_and_scale(scratch, write, reader, truth)
        finally:
            reader.close()
    finally:
        producer.close()  # its lease renewer stops before the broker does
    report(truth, reader, scratch / "wordcount.log")


def run_and_scale(
    scratch: Path, write: Callable[[int], None], reader: CountReader, truth: Counter[str]
) -> None:
    """Run wordcount under the supervisor, scale it to 3 processors while words keep coming,
    read every count; the supervisor and its processors are stopped however this ends."""
    print("== running wordcount with 2 processors (splitstate run --all)", flush=True)
    log = (scratch / "wordcount.log").open("wb")
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "framework.ops.cli", "run", APP, "--all"], stdout=log, stderr=log
    )
    try:
        reader.read_until(dict(truth), timeout=120)
        print(f"   all {RECORDS} words counted", flush=True)

        print("\n== scaling to 3 processors while words keep coming", flush=True)
        stop = threading.Event()

        def keep_writing() -> None:
            while not stop.is_set():
                write(500)
                time.sleep(0.1)

        writer = threading.Thread(target=keep_writing)
        writer.start()
        try:
            time.sleep(1.0)
            splitstate("scale", APP, "--processors", "3")
            wait_for_handoff(scratch / "wordcount.log", timeout=120)
            time.sleep(1.0)
        finally:
            stop.set()
            writer.join()
        reader.read_until(dict(truth), timeout=120)
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=90)
        log.close()


def report(truth: Counter[str], reader: CountReader, log: Path) -> None:
    """Show the handoff, the top words, whether every count was exact, and the status."""
    for line in log.read_text().splitlines():
        if "handoff" in line or "took over" in line or "released" in line:
            print("   " + line.split(": ", 1)[-1], flush=True)
    exact = all(reader.counts[w] == list(range(1, n + 1)) for w, n in truth.items())
    print(f"\n{'word':<12} {'count':>7} {'expected':>9}")
    for word, expected in truth.most_common(10):
        print(f"{word:<12} {reader.counts[word][-1]:>7} {expected:>9}")
    total = sum(truth.values())
    print(
        f"\n{total} words in all; every word's outputs are exactly 1..n across the scale-out "
        f"(nothing lost, nothing repeated): {exact}\n",
        flush=True,
    )
    splitstate("status", APP)
    if not exact:
        raise SystemExit("wordcount's counts were not exact; see the log above")


def wait_for_handoff(log: Path, timeout: float) -> None:
    """Wait until the new processor took its partitions over."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "processor 2 took over" in log.read_text(errors="replace"):
            return
        time.sleep(0.3)
    raise SystemExit(f"the scale did not complete in {timeout:.0f}s; see {log}")


class CountReader:
    """Reads 'word-counts' incrementally, keeping every word's outputs in order."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "demo-reader", "enable.auto.commit": False}
        )
        self.consumer.assign([TopicPartition("word-counts", p, OFFSET_BEGINNING) for p in range(8)])
        self.counts: defaultdict[str, list[int]] = defaultdict(list)

    def read_until(self, truth: dict[str, int], timeout: float) -> None:
        """Read until every word reached its true count (or the timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in self.consumer.consume(num_messages=5000, timeout=0.5):
                value = message.value()
                if message.error() is None and value is not None:
                    data = json.loads(value)
                    self.counts[data["word"]].append(data["count"])
            if all(self.counts[w] and self.counts[w][-1] >= n for w, n in truth.items()):
                return

    def close(self) -> None:
        """Leave (before the broker stops, so nothing is left trying to reach it)."""
        self.consumer.close()


if __name__ == "__main__":
    main()
