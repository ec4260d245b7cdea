"""CPU per record of the time path, without Kafka: where bench/window_sum.py's records go.

The app of bench/window_sum.py (``@app.window(topic, Tumbling(timedelta(minutes=1)), Sum(),
value_type=int)``) and, beside it, the same sum kept by hand in a plain store (no time: the
floor of what the framework costs per record) process the same records through
``RecordProcessor`` as the runtime runs it: RocksDB on disk behind the value cache, batches of
``--batch`` records (the runtime's default 2,000), each checked against the registry view
(``confirm_markers``), processed record by record, then sealed (staged) and committed. Records
are what bench/window_input.py writes: ``--keys`` keys drawn uniformly, JSON int values, event
times rising over ``--minutes`` minutes, the ``splitstate.count`` header, placed on 4
partitions as the producer places them.

Columns: µs of CPU per record (process CPU time, this thread only) for processing (the
``process`` calls) and for sealing and committing the batches, and records per CPU second in
all. The best of ``--repeat`` runs (each on a fresh database; the apps run in turn) is
shown. ``--profile N`` then
prints the N functions with the most own time (cProfile) of one run of the time app.

Run: .venv/bin/python bench/time_path.py [--records N] [--keys N] [--minutes N] [--batch N]
[--repeat N] [--profile N]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the bench package

import orjson
from rich.console import Console
from rich.table import Table

from bench.window_sum_runs import window_sum_app
from framework import App, AppConfig, Record
from framework.coordination.registry import TopicEntry
from framework.growth.placement import COUNT_HEADER
from framework.processing import RecordProcessor
from framework.records import StoredMessage
from rebalance import TopicHistory, bucket, key_hash
from statestore import DatabaseIdentity, KeyState, ProcessorDatabase

__all__ = ["Measured", "main", "messages", "plain_sum_app", "run"]

TOPIC, OUTPUT, PARTITIONS = "readings", "sums", 4
MINUTE = 60_000


def _config() -> AppConfig:
    return AppConfig.load(
        app_id="time-path",
        kafka={"bootstrap_servers": "127.0.0.1:9"},  # (never connected)
        inputs=[{"topic": TOPIC, "partitions": PARTITIONS}],
        outputs=[{"topic": OUTPUT, "partitions": PARTITIONS}],
        initial_processors=1,
    )


def plain_sum_app(config: AppConfig) -> App:
    """Each key's running sum in a plain store: no time, no windows, no outputs."""
    app = App(config)
    app.store("sums")

    @app.processor(config.inputs[0].topic, int)
    def running_sum(record: Record[int], state: KeyState[Any]) -> None:
        state.set(state.get(0) + record.value)

    return app


def messages(records: int, keys: int, minutes: int) -> list[StoredMessage]:
    """The records bench/window_input.py writes (without its closing ones), partitioned."""
    names = [f"sensor-{i:05d}".encode() for i in range(keys)]
    homes = [bucket(key_hash(name), PARTITIONS, PARTITIONS) for name in names]
    header: list[tuple[str, bytes | None]] = [(COUNT_HEADER, str(PARTITIONS).encode())]
    rng = random.Random(35)
    span = minutes * MINUTE
    offsets = [0] * PARTITIONS
    made = []
    for i in range(records):
        k = rng.randrange(keys)
        partition = homes[k]
        value = orjson.dumps(rng.randrange(1000))
        at = i * span // records
        made.append(
            StoredMessage(TOPIC, partition, offsets[partition], names[k], value, at, header)
        )
        offsets[partition] += 1
    return made


@dataclass(frozen=True)
class Measured:
    """CPU seconds of one run: processing, sealing and committing; records; outputs."""

    process: float
    commit: float
    records: int
    outputs: int


def run(app: App, records: list[StoredMessage], batch_size: int, scratch: Path) -> Measured:
    """Process ``records`` with ``app`` on a fresh database in ``scratch``."""
    path = Path(tempfile.mkdtemp(dir=scratch))
    database = ProcessorDatabase.open(path, DatabaseIdentity("time-path", 0), app.store_specs())
    history = TopicHistory(TOPIC, (PARTITIONS,))
    processor = RecordProcessor(
        app,
        {TOPIC: PARTITIONS},
        histories={TOPIC: history},
        registry=lambda: {TOPIC: TopicEntry(history)},
    )
    clock = time.thread_time
    processing = committing = 0.0
    outputs = 0
    try:
        for start in range(0, len(records), batch_size):
            chunk = records[start : start + batch_size]
            began = clock()
            batch = database.begin()
            processor.confirm_markers(chunk)
            for message in chunk:
                where = (message._topic, message._partition, message._offset)
                produced, _dead = processor.process(batch, message, where=where)
                outputs += len(produced)
                processor.take_letters()
            for message in chunk:
                batch.set_offset(message._topic, message._partition, message._offset + 1)
            sealed = clock()
            batch.seal()
            batch.commit()
            processing += sealed - began
            committing += clock() - sealed
    finally:
        database.close()
        shutil.rmtree(path, ignore_errors=True)
    return Measured(processing, committing, len(records), outputs)


def main() -> None:
    """Print the table (and, with ``--profile``, the profile)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument(
        "--minutes",
        type=int,
        default=None,
        help="event time spanned (default: as many records per key and minute as "
        "bench/window_sum.py's 1M records over 60 minutes)",
    )
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    args = parser.parse_args()
    minutes = args.minutes or max(1, round(60 * args.records / 1_000_000 * 10_000 / args.keys))
    records = messages(args.records, args.keys, minutes)
    scratch = Path(tempfile.mkdtemp(prefix="splitstate-time-path-"))
    try:
        apps = {
            "@app.window, Tumbling 1 min, Sum": window_sum_app(_config()),
            "plain store, running sum (no time)": plain_sum_app(_config()),
        }
        table = Table(
            title=f"{args.records:,} records, {args.keys:,} keys, {minutes} minutes, batches of "
            f"{args.batch:,} "
            f"(best of {args.repeat})"
        )
        for column in ("app", "process µs/rec", "seal+commit µs/rec", "records/CPU s", "outputs"):
            table.add_column(column, justify="left" if column == "app" else "right")
        runs: dict[str, list[Measured]] = {label: [] for label in apps}
        for _ in range(args.repeat):  # (the apps in turn: a change of the machine's load
            for label, app in apps.items():  # falls on both)
                runs[label].append(run(app, records, args.batch, scratch))
        for label, measured in runs.items():
            m = min(measured, key=lambda m: m.process + m.commit)
            total = m.process + m.commit
            table.add_row(
                label,
                f"{m.process / m.records * 1e6:.1f}",
                f"{m.commit / m.records * 1e6:.1f}",
                f"{m.records / total:,.0f}",
                f"{m.outputs:,}",
            )
        console = Console()
        if not console.is_terminal:
            console = Console(width=140)  # a log or a pipe: one line per row
        console.print(table)
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(run, apps[next(iter(apps))], records, args.batch, scratch)
            pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
