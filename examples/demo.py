"""The demo behind `make demo`: a local broker, wordcount on 2 processors, results shown.

It starts a Kafka broker in a temporary directory, creates wordcount's topics (8 partitions),
writes 30,000 words, runs wordcount with 2 processors under the local supervisor, checks
every word's last output against a count made here, prints the top words and
`splitstate status`, and stops everything it started.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from framework.broker import LocalBroker
from framework.producer import SplitstateProducer

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
        [sys.executable, "-m", "framework.cli", *args], capture_output=True, text=True, check=False
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
    """Create topics, produce words, run the app, check and show the results."""
    print("== creating wordcount's topics", flush=True)
    splitstate("topics", "create", APP)

    rng = random.Random(42)
    vocabulary = SENTENCE.split()
    words = [rng.choice(vocabulary) for _ in range(RECORDS)]
    truth = Counter(words)
    producer = SplitstateProducer({"bootstrap.servers": bootstrap}, ["words"])
    for word in words:
        producer.produce("words", word.encode(), b"")
    producer.flush()
    print(f"\n== produced {RECORDS} words ({len(truth)} distinct) to 'words'", flush=True)

    print("== running wordcount with 2 processors (splitstate run --all)", flush=True)
    log = (scratch / "wordcount.log").open("wb")
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "framework.cli", "run", APP, "--all"], stdout=log, stderr=log
    )
    try:
        latest = read_counts(bootstrap, until=truth, timeout=120)
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=90)
        log.close()
    exact = latest == dict(truth)
    print(f"\n{'word':<12} {'count':>7} {'expected':>9}")
    for word, expected in truth.most_common(10):
        print(f"{word:<12} {latest.get(word, 0):>7} {expected:>9}")
    print(f"\nevery word's last output equals its true count: {exact}\n", flush=True)
    splitstate("status", APP)
    if not exact:
        raise SystemExit("wordcount's counts did not match; see the log above")


def read_counts(bootstrap: str, until: Counter[str], timeout: float) -> dict[str, int]:
    """Read 'word-counts' until every word reached its true count (or the timeout)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "demo-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("word-counts", p, OFFSET_BEGINNING) for p in range(8)])
    latest: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=5000, timeout=0.5):
                value = message.value()
                if message.error() is None and value is not None:
                    data = json.loads(value)
                    latest[data["word"]] = max(latest.get(data["word"], 0), data["count"])
            if all(latest.get(w, 0) >= n for w, n in until.items()):
                break
    finally:
        consumer.close()
    return latest


if __name__ == "__main__":
    main()
