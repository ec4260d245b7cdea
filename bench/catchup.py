"""Catch-up against live processing: how fast a joining processor rebuilds its keys.

One topic (1M records by default, 4 partitions, 10,000 distinct words) of a local broker,
wordcount with ``initial_processors: 1``:

1. *live*: processor 0 of 1 processes the whole topic through the runtime (at-least-once,
   batches pipelined), sending one output per record and committing the group's offsets: the
   rate new records are processed at.
2. *catch-up*: the app is scaled 1 -> 2 (``bootstrap: replay``) and processor 1 runs alone:
   its catch-up reads partitions 1 and 3 from the beginning to T1 (what processor 0 committed:
   all of them) and applies every record to its gained keys' state in restore mode, through
   the same runtime loop. Processor 0 does not run, so it reads them all and nothing is
   released.

Each row runs in a process of its own (bench/throughput_runs.py), one after the other, timed
as bench/throughput.py's rows: records/s from the first record to the run's return; start-up
from starting the process to the first record. The ratio catch-up / live follows (issue 17's
target: at least 1.5, so a joiner overtakes a stream its old owner keeps up with).

Run: .venv/bin/python bench/catchup.py [--records N] [--distinct N] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the bench package

from bench.scratch import scratch_and_broker
from bench.throughput import Row, run_child
from bench.throughput_runs import PARTITIONS
from bench.words import produce_words
from framework.kafka import Clients, TopicSpec

RUNS = Path(__file__).resolve().parent / "throughput_runs.py"
ROWS = [
    ("live: processor 0 of 1, at-least-once", "at-least-once"),
    ("catch-up: processor 1 joins (replay)", "catch-up"),
]


def run_all(bootstrap: str, records: int, scratch: Path, *, distinct: int) -> list[Row]:
    """Write the topic, then run the live row and the catch-up row on it, in turn."""
    tag = uuid.uuid4().hex[:8]
    topic, output, group = f"bench-words-{tag}", f"bench-counts-{tag}", f"bench-catchup-{tag}"
    Clients({"bootstrap.servers": bootstrap}).create_topics(
        [TopicSpec(topic, PARTITIONS), TopicSpec(output, PARTITIONS)]
    )
    start = time.perf_counter()
    produce_words(bootstrap, topic, records, distinct=distinct)
    print(f"produced {records:,} records in {time.perf_counter() - start:.1f}s", flush=True)
    rows = []
    for label, kind in ROWS:
        print(f"running {label} ...", flush=True)
        command = [sys.executable, str(RUNS), kind, "--bootstrap", bootstrap, "--topic", topic]
        command += ["--output", output, "--records", str(records)]
        command += ["--state", str(scratch / "state"), "--group", group]
        rows.append(run_child(label, command, 600 + records / 500))
    return rows


def print_table(rows: list[Row]) -> None:
    """The table, then catch-up / live."""
    print(f"\n{'run':<42} {'records':>9} {'records/s':>10} {'start-up s':>10} {'peak RSS MB':>11}")
    for row in rows:
        if row.timing is None:
            print(f"{row.label:<42} {row.why}")
            continue
        t = row.timing
        print(
            f"{row.label:<42} {t.records:>9,} {t.rate:>10,.0f} {t.startup:>10.2f} "
            f"{t.rss_kib / 1024:>11.0f}"
        )
    live, catch_up = (row.timing for row in rows)
    ratio = "n/a" if not live or not catch_up else f"{catch_up.rate / live.rate:.2f}"
    print(f"\ncatch-up / live = {ratio} (target: at least 1.5)")


def main() -> None:
    """Set up, run both rows, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--distinct", type=int, default=10_000, help="distinct words (keys)")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with scratch_and_broker(args.bootstrap, "splitstate-catchup-") as (scratch, bootstrap):
        rows = run_all(bootstrap, args.records, scratch, distinct=args.distinct)
    print_table(rows)


if __name__ == "__main__":
    main()
