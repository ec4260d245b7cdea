"""The Quix Streams side of bench/window_sum.py: the tumbling 1-minute sum per key.

Runs with the Python of the Quix virtualenv (``bench.quix_env``; Quix Streams is no dependency
of the project), standalone: of the project it imports only ``bench.peak_rss`` (standard
library only). The app is Quix's own spelling of the benchmark:
``sdf.tumbling_window(duration_ms=60_000).sum().final()`` over the input's JSON values by their
Kafka timestamps (Quix's default closing strategy ``"key"``: a key's window closes when that
key's time passes its end, as in splitstate), each result sent to the output topic keyed by
the input's key, reading from the beginning with its own consumer group and Quix's defaults
otherwise (changelog topics on, 5 s checkpoints) but for ``processing_guarantee``. The
benchmark runs it before any splitstate run, so the input holds no tick (a splitstate record
Quix would take for a reading). Once it has
processed ``records`` records it stops (``Application.stop``: the last checkpoint is
committed) and prints one JSON line with the fields of ``bench.throughput_runs.Timing`` (timed
as there) and ``version``.

Run: .cache/quix-streams-VERSION/bin/python bench/quix_window_sum.py BOOTSTRAP INPUT OUTPUT
RECORDS STATE_DIR --group GROUP --guarantee GUARANTEE --started EPOCH
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

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
    parser.add_argument("--group", required=True)
    parser.add_argument("--guarantee", choices=["at-least-once", "exactly-once"], required=True)
    parser.add_argument("--started", type=float, default=time.time())
    args = parser.parse_args()

    seen = {"count": 0, "first": 0.0, "first_wall": 0.0, "first_cpu": 0.0, "last": 0.0}

    def processed(_topic: str, _partition: int, _offset: int) -> None:
        now = time.perf_counter()
        if not seen["count"]:
            seen["first"], seen["first_wall"] = now, time.time()
            seen["first_cpu"] = time.process_time()
        seen["count"] += 1
        seen["last"] = now
        if seen["count"] >= args.records:
            app.stop()

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        processing_guarantee=args.guarantee,
        on_message_processed=processed,
        loglevel="WARNING",
    )
    readings = app.topic(args.input, key_deserializer="bytes", value_deserializer="json")
    sums = app.topic(args.output, key_serializer="bytes", value_serializer="json")
    sdf = app.dataframe(readings)
    sdf = sdf.tumbling_window(duration_ms=60_000).sum().final()
    sdf.to_topic(sums)
    app.run()
    end = time.perf_counter()
    timing = {
        "startup": seen["first_wall"] - args.started,
        "steady": end - seen["first"],
        "records": int(seen["count"]) - 1,
        "stop": end - seen["last"],
        "rss_kib": peak_rss_kib(),
        "cpu": time.process_time() - seen["first_cpu"],
        "version": quixstreams.__version__,
    }
    print(json.dumps(timing), flush=True)


if __name__ == "__main__":
    main()
