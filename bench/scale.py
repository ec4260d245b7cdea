"""Live scaling of wordcount, measured: snapshot against replay, on short and long histories.

A local broker. For each history length (default 1M and 10M records over the same 100,000
words, 8 partitions) one input topic is written; then, for each way a joiner gets its state
(``bootstrap: snapshot`` and ``bootstrap: replay``), a fresh app with 2 processors
(`splitstate run --all`) processes that whole history, a producer thread writes a steady
stream, and the app scales 2 -> 3 (or the ``--scales`` given). For every scale it prints the
time from the scale command to all handoffs COMPLETE (the receivers' process start-up and,
with snapshots, the source's fresh snapshot included); the longest catch-up, from a handoff's
START_CATCH_UP to its COMPLETE (no process start-up); the records the receivers replayed
(against the records in the topic), the keys they built in bulk, the bytes of the sources'
snapshots they copied (whole snapshots are copied; of them only the gained keys' ranges are
read) and how long the transfer took. Then the output pauses, p50/max over partitions: the
*handoff pause* of each moved partition (from its last output before its release to its first
output after it: the old owner's last batch to the new owner's first), and the longest gap in
output of each partition, moved and unmoved, during the scale (unmoved partitions show what
batching and a busy machine give without a handoff). A second table splits each moved
partition's handoff pause (p50 over them) at the lines the processors log: the old owner's last
output -> its RELEASE written ("old owner"), -> the receiver read it ("to receiver"), -> its
COMPLETE written, the catch-up finished to F ("to F"), -> its consumer reads the partition
("assign"), -> the partition's first records came back ("1st fetch"), -> its first output
("1st output"). The last lines compare each way's time on the longest history with its time on
the shortest (issue goal: within 1.3x with snapshots: the cost grows with state, not history).

Run: .venv/bin/python bench/scale.py [--histories 1000000,10000000] [--keys 100000]
     [--rate RECORDS_PER_S] [--scales 3] [--ways snapshot,replay] [--logs DIR]
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
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples package

import yaml
from confluent_kafka import Consumer, TopicPartition

from framework import AppConfig
from framework.coordination.scaling import read_control, request_scale
from framework.loader import load_app
from framework.ops.broker import LocalBroker
from framework.producer import SplitstateProducer
from rebalance.control import Scale

APP = "examples.wordcount.app:app"
PARTITIONS = 8
CLI = [sys.executable, "-m", "framework.ops.cli"]
TOOK_OVER = re.compile(
    r"processor (\d+) took over \[(.*?)\] from processor (\d+) .*replayed (\d+) records "
    r"in ([\d.]+)s \((\d+)/s\)(?:; before that it took ([\d,]+) keys)?"
)
STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "
RELEASED = re.compile(STAMP + r".*processor \d+ released \[(.*?)\] to processor", re.MULTILINE)
EVENT = re.compile(
    STAMP + r".*generation (\d+) handoff (\d+) -> (\d+): (START_CATCH_UP|COMPLETE)$", re.MULTILINE
)
READ_RELEASE = re.compile(
    STAMP + r".*processor \d+: generation (\d+) handoff \d+ -> \d+: read RELEASE of \[(.*?)\]",
    re.MULTILINE,
)
READS = re.compile(STAMP + r".*processor \d+: reads \[(.*?)\] it took over$", re.MULTILINE)
FIRST_READ = re.compile(
    STAMP + r".*processor \d+: first records of \[(.*?)\] it took over read", re.MULTILINE
)
#: the parts of a handoff pause, in order (see ``pause_parts``)
PARTS = ("old owner", "to receiver", "to F", "assign", "1st fetch", "1st output")
TRANSFERRED = re.compile(
    r"processor (\d+): took (\d+) keys gained from processor (\d+) out of its snapshot \S+ "
    r"\((\d+) bytes; ([\d.]+)s since the transfer began\)"
)


class Stream(threading.Thread):
    """Writes words at a steady rate until stopped."""

    def __init__(self, bootstrap: str, topic: str, keys: int, rate: int) -> None:
        super().__init__(daemon=True)
        self.producer = SplitstateProducer({"bootstrap.servers": bootstrap}, [topic])
        self.topic, self.keys, self.rate = topic, keys, rate
        self.stop = threading.Event()
        self.rng = random.Random(9)
        self.written = 0

    def run(self) -> None:
        tick = 0.05
        while not self.stop.is_set():
            for _ in range(int(self.rate * tick)):
                word = f"w{self.rng.randrange(self.keys)}".encode()
                self.producer.produce(self.topic, word, b"")
                self.written += 1
            self.producer.poll(0)
            time.sleep(tick)
        self.producer.close(60)


@dataclass
class Row:
    """One scale of one case."""

    history: int
    way: str
    label: str
    elapsed: float
    in_topic: int
    took: list[tuple[str, ...]] = field(default_factory=list)
    transferred: list[tuple[str, ...]] = field(default_factory=list)
    moved: set[int] = field(default_factory=set)
    gaps: dict[int, float] = field(default_factory=dict)
    #: per moved partition, its output's pause across its release
    handoff_gaps: dict[int, float] = field(default_factory=dict)
    #: the longest START_CATCH_UP -> COMPLETE of the scale's handoffs (no process start-up)
    catch_up: float = 0.0
    #: per moved partition, its handoff pause in parts (seconds, in the order of ``PARTS``)
    parts: dict[int, tuple[float, ...]] = field(default_factory=dict)


def stamp_of(text: str) -> float:
    """A log line's timestamp (local time), as epoch seconds."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def releases(log: str) -> dict[int, float]:
    """Per input partition, when the newest release of it was logged."""
    return {
        int(partition): stamp_of(stamp)
        for stamp, partitions in RELEASED.findall(log)
        for partition in re.findall(r"'[^']*', (\d+)", partitions)
    }


def _newest(
    pattern: re.Pattern[str], log: str, since: float, generation: int | None = None
) -> dict[int, float]:
    """Per input partition, when the newest line of ``pattern`` (its first group a stamp,
    its last the partitions; with ``generation``, its second the generation, which must be
    that) was logged, at or after ``since``."""
    found: dict[int, float] = {}
    for match in pattern.finditer(log):
        moment = stamp_of(match.group(1))
        if moment < since or (generation is not None and int(match.group(2)) != generation):
            continue
        for partition in re.findall(r"'[^']*', (\d+)", match.group(match.lastindex or 1)):
            found[int(partition)] = moment
    return found


def pause_parts(
    log: str,
    scale: Scale,
    stamps: dict[int, list[int]],
    window: tuple[int, int],
) -> dict[int, tuple[float, ...]]:
    """Per moved partition of ``scale``, its handoff pause split at the lines the processors
    log (seconds, in the order of ``PARTS``): the old owner's last output -> RELEASE written
    ("released"), -> the receiver read it, -> its COMPLETE (the catch-up finished to F), ->
    its consumer reads the partition, -> the first records of it came back, -> the first
    output of them. A partition missing a line is left out."""
    since = window[0] / 1000 - 1.0
    released = _newest(RELEASED, log, since)
    read = _newest(READ_RELEASE, log, since, scale.generation)
    completed: dict[int, float] = {}
    for stamp, generation, source, target, event in EVENT.findall(log):
        handoff = scale.handoffs.get((int(source), int(target)))
        if int(generation) == scale.generation and event == "COMPLETE" and handoff is not None:
            completed.update({p: stamp_of(stamp) for _t, p in handoff.partitions})
    reads = _newest(READS, log, since)
    first = _newest(FIRST_READ, log, since)
    parts: dict[int, tuple[float, ...]] = {}
    for p in sorted(released.keys() & stamps.keys()):
        marks = [released[p], read.get(p), completed.get(p), reads.get(p), first.get(p)]
        if any(mark is None for mark in marks):
            continue
        moment = int(released[p] * 1000)
        before = max((t for t in stamps[p] if t <= moment), default=window[0]) / 1000
        after = min((t for t in stamps[p] if t > moment), default=window[1]) / 1000
        edges = [before, *(mark for mark in marks if mark is not None), after]
        parts[p] = tuple(b - a for a, b in pairwise(edges))
    return parts


def catch_up_seconds(log: str, generation: int) -> float:
    """The longest START_CATCH_UP -> COMPLETE of ``generation``'s handoffs."""
    starts: dict[tuple[str, str], float] = {}
    longest = 0.0
    for stamp, gen, source, target, event in EVENT.findall(log):
        if int(gen) != generation:
            continue
        if event == "START_CATCH_UP":
            starts[(source, target)] = stamp_of(stamp)
        elif (source, target) in starts:
            longest = max(longest, stamp_of(stamp) - starts[(source, target)])
    return longest


def write_history(bootstrap: str, topic: str, records: int, keys: int) -> float:
    """Create ``topic`` and write ``records`` words into it; returns the seconds it took."""
    started = time.monotonic()
    producer = SplitstateProducer(
        {"bootstrap.servers": bootstrap}, [topic], {"linger.ms": 50, "batch.size": 1 << 20}
    )
    rng = random.Random(1)
    for i in range(records):
        producer.produce(topic, f"w{rng.randrange(keys)}".encode(), b"")
        if i % 100_000 == 0:
            producer.poll(0)
    producer.close(600)
    return time.monotonic() - started


def ends_of(bootstrap: str, topic: str) -> dict[int, int]:
    """The end offset of each partition of ``topic``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def wait_processed(bootstrap: str, group: str, topic: str, ends: dict[int, int]) -> float:
    """Wait until group ``group`` committed ``ends``; returns the seconds waited."""
    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        while True:
            committed = consumer.committed(
                [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30
            )
            if all(tp.offset >= ends[tp.partition] for tp in committed):
                return time.monotonic() - started
            time.sleep(1.0)
    finally:
        consumer.close()


def output_stamps(bootstrap: str, topic: str, start_ms: int, end_ms: int) -> dict[int, list[int]]:
    """Per output partition: the timestamps (ms) of its outputs within the window, sorted."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"gaps-{start_ms}",
            "enable.auto.commit": False,
        }
    )
    starts = consumer.offsets_for_times(
        [TopicPartition(topic, p, start_ms) for p in range(PARTITIONS)], timeout=30
    )
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in range(PARTITIONS)
    }
    stamps: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    done = {tp.partition for tp in starts if tp.offset < 0 or tp.offset >= ends[tp.partition]}
    consumer.assign([tp for tp in starts if tp.partition not in done])
    while len(done) < PARTITIONS:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            partition, offset = message.partition(), message.offset()
            if partition is None or offset is None or partition in done:
                continue
            stamp = message.timestamp()[1]
            if stamp > end_ms or offset + 1 >= ends[partition]:
                done.add(partition)
            if start_ms <= stamp <= end_ms:
                stamps[partition].append(stamp)
    consumer.close()
    return {partition: sorted(values) for partition, values in stamps.items()}


def longest_gap(stamps: list[int], start_ms: int, end_ms: int) -> float:
    """The longest gap (s) between outputs (or the window's edges) in the window."""
    edges = zip([start_ms, *stamps], [*stamps, end_ms], strict=True)
    return max(b - a for a, b in edges) / 1000


def gap_across(stamps: list[int], moment_ms: int, start_ms: int, end_ms: int) -> float:
    """The gap (s) between the last output before ``moment_ms`` and the first after it."""
    before = max((t for t in stamps if t <= moment_ms), default=start_ms)
    after = min((t for t in stamps if t > moment_ms), default=end_ms)
    return (after - before) / 1000


def app_config(scratch: Path, bootstrap: str, topic: str, way: str, history: int) -> Path:
    """The wordcount config of one case (its own app id, output topic and state)."""
    name = f"{way}-{history}"
    base = yaml.safe_load(Path("examples/wordcount/config.yaml").read_text())
    base.update(
        app_id=f"bench-scale-{name}",
        kafka={"bootstrap_servers": bootstrap},
        inputs=[{"topic": topic, "partitions": PARTITIONS}],
        outputs=[{"topic": f"counts-{name}", "partitions": PARTITIONS}],
        state_dir=str(scratch / name / "state"),
        scaling={"ready_lag": 500},
        bootstrap=way,
        snapshots={"enabled": way == "snapshot"},
    )
    path = scratch / f"{name}.yaml"
    path.write_text(yaml.safe_dump(base))
    subprocess.run(
        [*CLI, "topics", "create", APP, "--config", str(path)], check=True, capture_output=True
    )
    return path


def measure_pauses(
    row: Row, scale: Scale, log_text: str, bootstrap: str, window: tuple[int, int]
) -> None:
    """Fill ``row``'s output gaps, handoff pauses and their parts from the output topic's
    timestamps within ``window`` (ms) and the processors' log."""
    stamps = output_stamps(bootstrap, f"counts-{row.way}-{row.history}", *window)
    row.gaps = {p: longest_gap(values, *window) for p, values in stamps.items()}
    released = releases(log_text)
    row.handoff_gaps = {
        p: gap_across(stamps[p], int(released[p] * 1000), *window)
        for p in row.moved
        if p in released
    }
    row.catch_up = catch_up_seconds(log_text, scale.generation)
    row.parts = pause_parts(log_text, scale, {p: stamps[p] for p in row.moved}, window)


def run_case(
    scratch: Path, bootstrap: str, topic: str, way: str, *, history: int, args: Any
) -> list[Row]:
    """One app over ``topic``: process the history, then scale under a live stream."""
    config_file = app_config(scratch, bootstrap, topic, way, history)
    config = AppConfig.load(config_file)
    app = load_app(APP, config_file)
    app.configure(config)
    log_path = scratch / f"{way}-{history}.log"
    rows = []
    with log_path.open("wb") as log:
        supervisor = subprocess.Popen(
            [*CLI, "run", APP, "--all", "--config", str(config_file)], stdout=log, stderr=log
        )
    stream = Stream(bootstrap, topic, args.keys, args.rate)
    try:
        took = wait_processed(bootstrap, config.app_id, topic, ends_of(bootstrap, topic))
        print(f"  {way}: the history processed in {took:.0f}s", flush=True)
        stream.start()
        time.sleep(5)
        for processors in args.scales:
            before = len(TOOK_OVER.findall(log_path.read_text()))
            copies = len(TRANSFERRED.findall(log_path.read_text()))
            start = time.time()
            scale = request_scale(app, processors)
            while (read_control(app).processors or 0) != processors:
                if supervisor.poll() is not None:
                    raise SystemExit(f"the app stopped; see {log_path}")
                time.sleep(0.2)
            elapsed = time.time() - start
            time.sleep(3)
            row = Row(history, way, f"{scale.old_processors}->{processors}", elapsed, 0)
            row.in_topic = sum(ends_of(bootstrap, topic).values())
            row.took = TOOK_OVER.findall(log_path.read_text())[before:]
            row.transferred = TRANSFERRED.findall(log_path.read_text())[copies:]
            row.moved = {int(p) for h in scale.handoffs.values() for _t, p in h.partitions}
            window = (int(start * 1000), int((start + elapsed + 3) * 1000))
            measure_pauses(row, scale, log_path.read_text(), bootstrap, window)
            rows.append(row)
            print(f"  {way}: {row.label} in {elapsed:.1f}s", flush=True)
    finally:
        stream.stop.set()
        if stream.is_alive():
            stream.join()
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=300)
        if args.logs:
            Path(args.logs).mkdir(parents=True, exist_ok=True)
            shutil.copy(log_path, Path(args.logs) / log_path.name)
        shutil.rmtree(scratch / f"{way}-{history}", ignore_errors=True)
    return rows


def print_table(rows: list[Row]) -> None:
    """One line per scale of each case, then the long/short history ratios."""
    header = ("history", "bootstrap", "scale", "to ACTIVE", "catch-up", "replayed", "in topic")
    print("{:>11} {:<9} {:<6} {:>9} {:>9} {:>10} {:>11}".format(*header), end="")
    print(f" {'bulk keys':>10} {'snapshot copied':>15} {'handoff pause':>14}", end="")
    print(f" {'moved longest':>14} {'unmoved longest':>16}")
    for row in rows:
        handoff = [row.handoff_gaps[p] for p in sorted(row.handoff_gaps)] or [0.0]
        moved_gaps = [row.gaps[p] for p in sorted(row.moved)] or [0.0]
        unmoved = [row.gaps[p] for p in range(PARTITIONS) if p not in row.moved] or [0.0]
        replayed = sum(int(took[3]) for took in row.took)
        bulk = sum(int((took[6] or "0").replace(",", "")) for took in row.took)
        copied = sum(int(t[3]) for t in row.transferred)
        seconds = max((float(t[4]) for t in row.transferred), default=0.0)
        read = f"{copied / 2**20:.1f} MiB {seconds:.1f}s"
        print(
            f"{row.history:>11,} {row.way:<9} {row.label:<6} {row.elapsed:>8.1f}s "
            f"{row.catch_up:>8.1f}s {replayed:>10,} {row.in_topic:>11,} {bulk:>10,} "
            f"{read if row.transferred else '-':>15} {_p50_max(handoff):>14} "
            f"{_p50_max(moved_gaps):>14} {_p50_max(unmoved):>16}"
        )
    print("\nhandoff pause in parts, p50 over moved partitions (ms):")
    print("{:>11} {:<9} {:<6}".format("history", "bootstrap", "scale"), end="")
    print("".join(f" {part:>11}" for part in PARTS), f"{'pause':>7}")
    for row in rows:
        print(f"{row.history:>11,} {row.way:<9} {row.label:<6}", end="")
        values = list(row.parts.values())
        for index in range(len(PARTS)):
            part = [v[index] for v in values]
            print(f" {statistics.median(part) * 1000 if part else float('nan'):>11.0f}", end="")
        pauses = [sum(v) for v in values]
        print(f" {statistics.median(pauses) * 1000 if pauses else float('nan'):>7.0f}")
    histories = sorted({row.history for row in rows})
    if len(histories) < 2:
        return
    print()
    short, long = histories[0], histories[-1]
    for way in sorted({row.way for row in rows}):
        first = [r.elapsed for r in rows if r.way == way and r.history == short]
        last = [r.elapsed for r in rows if r.way == way and r.history == long]
        if first and last:
            ratio = sum(last) / sum(first)
            print(f"{way}: {long:,} records of history take {ratio:.2f}x the time of {short:,}")


def _p50_max(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}/{max(values):.2f}s"


def main() -> None:
    """Write each history, run each case, print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--histories", default="1000000,10000000", help="records written first")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct words")
    parser.add_argument("--rate", type=int, default=3000, help="records/s during the scales")
    parser.add_argument("--scales", default="3", help="processor counts to scale to, in turn")
    parser.add_argument("--ways", default="snapshot,replay", help="bootstraps to compare")
    parser.add_argument("--logs", help="a directory to keep each case's processor log in")
    args = parser.parse_args()
    args.scales = [int(n) for n in args.scales.split(",")]
    histories = [int(n) for n in args.histories.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="splitstate-scale-bench-"))
    broker = LocalBroker(scratch / "broker")
    rows: list[Row] = []
    try:
        bootstrap = broker.start().bootstrap_servers
        for history in histories:
            topic = f"words-{history}"
            admin_config = scratch / f"topic-{history}.yaml"
            app_config(scratch, bootstrap, topic, "replay", history).rename(admin_config)
            took = write_history(bootstrap, topic, history, args.keys)
            print(f"history of {history:,} records written in {took:.0f}s", flush=True)
            for way in args.ways.split(","):
                rows.extend(run_case(scratch, bootstrap, topic, way, history=history, args=args))
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{args.keys:,} words, 8 partitions, {args.rate:,} records/s during the scales\n")
    print_table(rows)


if __name__ == "__main__":
    main()
