"""Wordcount on Quix Streams, for bench/throughput.py to compare splitstate with.

Runs with the Python of the benchmark's own virtualenv (bench/.quix-venv, made by
bench/throughput.py; Quix Streams is no dependency of the project), standalone: of the project
it imports only ``bench.peak_rss`` (standard library only). It counts each word (the input's
key) in its state store and sends one JSON output ``{"word", "count"}`` per record to the output
topic, reading the input from the beginning with its own consumer group, at-least-once (Quix's
default), with its default commit interval. Once it has processed ``records`` records it stops
(``Application.stop``), which commits the last checkpoint, and prints one JSON line with the
fields of ``bench.throughput_runs.Timing``: ``startup`` (seconds from ``--started``, the
parent's wall clock before it started this process, to the first record processed),
``steady`` (from then to ``Application.run`` returning), ``records`` (processed in
``steady``), ``stop`` (from the last record processed to the return: the final checkpoint and
closing), ``rss_kib`` (peak RSS, ``bench.peak_rss``), and ``version``.

Run: bench/.quix-venv/bin/python bench/quix_wordcount.py BOOTSTRAP INPUT OUTPUT RECORDS
STATE_DIR --started EPOCH --group GROUP [--no-changelog]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import quixstreams  # type: ignore[import-not-found,unused-ignore]
from quixstreams import Application  # type: ignore[import-not-found,unused-ignore]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench.peak_rss (stdlib only)

from bench.peak_rss import peak_rss_kib


def main() -> None:
    """Run the app until it processed ``records`` records; print its timing."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bootstrap")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("records", type=int)
    parser.add_argument("state_dir")
    parser.add_argument("--started", type=float, default=time.time())
    parser.add_argument("--group", default="bench-quix-wordcount")
    parser.add_argument("--no-changelog", action="store_true")
    args = parser.parse_args()

    seen = {"count": 0, "first": 0.0, "first_wall": 0.0, "last": 0.0}

    def processed(_topic: str, _partition: int, _offset: int) -> None:
        now = time.perf_counter()
        if not seen["count"]:
            seen["first"], seen["first_wall"] = now, time.time()
        seen["count"] += 1
        seen["last"] = now
        if seen["count"] >= args.records:
            app.stop()

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        use_changelog_topics=not args.no_changelog,
        on_message_processed=processed,
        loglevel="WARNING",
    )
    words = app.topic(args.input, key_deserializer="bytes", value_deserializer="bytes")
    counts = app.topic(args.output, key_serializer="bytes", value_serializer="json")

    def count(_value: bytes, key: bytes, _timestamp: int, _headers: Any, state: Any) -> Any:
        total: int = state.get("count", 0) + 1
        state.set("count", total)
        return {"word": key.decode(), "count": total}

    app.dataframe(words).apply(count, stateful=True, metadata=True).to_topic(counts)
    app.run()
    end = time.perf_counter()
    timing = {
        "startup": seen["first_wall"] - args.started,
        "steady": end - seen["first"],
        "records": int(seen["count"]) - 1,
        "stop": end - seen["last"],
        "rss_kib": peak_rss_kib(),
        "version": quixstreams.__version__,
    }
    print(json.dumps(timing), flush=True)


if __name__ == "__main__":
    main()
