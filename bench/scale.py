"""Live scaling of wordcount, measured: 2 -> 3 -> 5 -> 2 processors on 8 partitions.

A local broker; a history of words written first (so new processors have state to rebuild);
a producer thread writing a steady stream throughout; `splitstate run --all` with 2
processors; then each scale in turn. For every scale it prints the time from the scale
command to all handoffs COMPLETE, each receiver's records replayed (vs the records in the
topic) and catch-up records/s, and the longest pause in output of the moved partitions
(p50/max over them) next to the longest pause of the partitions that did not move.

Run: .venv/bin/python bench/scale.py [--history N] [--rate RECORDS_PER_S]
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples package

import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from framework import AppConfig
from framework.coordination.scaling import read_control, request_scale
from framework.loader import load_app
from framework.ops.broker import LocalBroker
from framework.producer import SplitstateProducer

APP = "examples.wordcount.app:app"
PARTITIONS = 8
TOOK_OVER = re.compile(
    r"processor (\d+) took over \[(.*?)\] from processor (\d+) .*replayed (\d+) records "
    r"in ([\d.]+)s \((\d+)/s\)"
)


class Stream(threading.Thread):
    """Writes words at a steady rate until stopped."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.producer = SplitstateProducer({"bootstrap.servers": bootstrap}, ["words"])
        self.rate = rate
        self.stop = threading.Event()
        self.rng = random.Random(9)
        self.written = 0

    def run(self) -> None:
        tick = 0.05
        while not self.stop.is_set():
            for _ in range(int(self.rate * tick)):
                self.producer.produce("words", f"w{self.rng.randrange(5000)}".encode(), b"")
                self.written += 1
            self.producer.poll(0)
            time.sleep(tick)
        self.producer.close(60)


def output_gaps(bootstrap: str, start_ms: int, end_ms: int) -> dict[int, float]:
    """Per output partition: the longest gap (s) between outputs within the window."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"gaps-{start_ms}",
            "enable.auto.commit": False,
        }
    )
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition("word-counts", p), timeout=30)[1]
        for p in range(PARTITIONS)
    }
    consumer.assign([TopicPartition("word-counts", p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    stamps: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    done = {p for p, end in ends.items() if end == 0}
    while len(done) < PARTITIONS:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            partition, offset = message.partition(), message.offset()
            if partition is None or offset is None:
                continue
            stamp = message.timestamp()[1]
            if start_ms <= stamp <= end_ms:
                stamps[partition].append(stamp)
            if offset + 1 >= ends[partition]:
                done.add(partition)
    consumer.close()
    gaps = {}
    for partition, values in stamps.items():
        values.sort()
        edges = zip([start_ms, *values], [*values, end_ms], strict=True)
        gaps[partition] = max((b - a for a, b in edges), default=end_ms - start_ms) / 1000
    return gaps


def start_app(scratch: Path, bootstrap: str, history: int) -> tuple[subprocess.Popen[bytes], Path]:
    """Topics, the history, and `splitstate run --all` with 2 processors."""
    config_file = scratch / "wordcount.yaml"
    base = yaml.safe_load(Path("examples/wordcount/config.yaml").read_text())
    base.update(
        kafka={"bootstrap_servers": bootstrap},
        state_dir=str(scratch / "state"),
        scaling={"ready_lag": 500},
    )
    config_file.write_text(yaml.safe_dump(base))
    cli = [sys.executable, "-m", "framework.ops.cli"]
    subprocess.run(
        [*cli, "topics", "create", APP, "--config", str(config_file)],
        check=True,
        capture_output=True,
    )
    producer = SplitstateProducer({"bootstrap.servers": bootstrap}, ["words"], {"linger.ms": 50})
    rng = random.Random(1)
    for _ in range(history):
        producer.produce("words", f"w{rng.randrange(5000)}".encode(), b"")
    producer.close(120)
    log_path = scratch / "run.log"
    with log_path.open("wb") as log:
        supervisor = subprocess.Popen(
            [*cli, "run", APP, "--all", "--config", str(config_file)], stdout=log, stderr=log
        )
    return supervisor, config_file


def print_table(rows: list[tuple[Any, float, list[Any], set[int], dict[int, float], int]]) -> None:
    """One line per receiver of each scale."""
    header = ("scale", "to ACTIVE", "receiver", "replayed", "in topic", "replay/s")
    print("{:<8} {:>9} {:>8} {:>10} {:>10} {:>9}".format(*header), end="")
    print(f" {'moved pause p50/max':>20} {'unmoved max':>12}")
    for scale, elapsed, took, moved, gaps, total in rows:
        moved_gaps = [gaps[p] for p in sorted(moved)]
        unmoved = [gaps[p] for p in range(PARTITIONS) if p not in moved]
        pauses = f"{statistics.median(moved_gaps):.2f}/{max(moved_gaps):.2f}s"
        label = f"{scale.old_processors}->{scale.new_processors}"
        for target, _parts, _source, replayed, _secs, rate in took:
            print(
                f"{label:<8} {elapsed:>8.1f}s {target:>8} {int(replayed):>10,} {total:>10,} "
                f"{int(rate):>9,} {pauses:>20} {max(unmoved, default=0):>11.2f}s"
            )


def main() -> None:
    """Run the scales and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--history", type=int, default=300_000, help="records written first")
    parser.add_argument("--rate", type=int, default=3000, help="records/s during the scales")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="splitstate-scale-bench-"))
    broker = LocalBroker(scratch / "broker")
    supervisor = None
    rows = []
    try:
        bootstrap = broker.start().bootstrap_servers
        supervisor, config_file = start_app(scratch, bootstrap, args.history)
        app = load_app(APP, config_file)
        app.configure(AppConfig.load(config_file))
        log_path = scratch / "run.log"
        stream = Stream(bootstrap, args.rate)
        stream.start()
        time.sleep(10)
        for processors in (3, 5, 2):
            before = len(TOOK_OVER.findall(log_path.read_text()))
            start = time.time()
            scale = request_scale(app, processors)
            while (read_control(app).processors or 0) != processors:
                time.sleep(0.2)
            elapsed = time.time() - start
            time.sleep(3)
            took = TOOK_OVER.findall(log_path.read_text())[before:]
            moved = {int(p) for h in scale.handoffs.values() for _t, p in h.partitions}
            gaps = output_gaps(bootstrap, int(start * 1000), int((start + elapsed + 3) * 1000))
            rows.append((scale, elapsed, took, moved, gaps, args.history + stream.written))
        stream.stop.set()
        stream.join()
    finally:
        if supervisor is not None:
            supervisor.send_signal(signal.SIGTERM)
            supervisor.wait(timeout=120)
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"history {args.history:,} records, then {args.rate:,} records/s during the scales\n")
    print_table(rows)


if __name__ == "__main__":
    main()
