"""The splitstate side of bench/window_sum.py, in a process of its own (its peak RSS is its own).

The app is what a user writes for a tumbling 1-minute sum per key: ``@app.window(topic,
Tumbling(timedelta(minutes=1)), Sum(), value_type=int)`` over the input's JSON int values, by
their Kafka timestamps, each window's result emitted once when it closes (``emit="final"``) to
the output topic. It runs through the processor runtime as ``splitstate run MODULE:app 0``
runs it (``ProcessorRuntime(app, 0).run()``), processor 0 of 1, with the config's defaults
but for the topics, the app id, the state directory and ``processing_guarantee``.

Run by the benchmark, not by hand: ``python bench/window_sum_runs.py --bootstrap HOST:PORT
--topic T --output O --records N --windows W --state DIR --group G --guarantee G --started
EPOCH``. Once it has processed N records and emitted W window results it stops (its last
outputs delivered, offsets committed) and prints ``bench.throughput_runs.Timing`` as a JSON
line, timed as that module says. Both conditions: the runtime counts the ticks it reads (its
own and earlier runs', which sit after the input) among the records processed, so N alone
could be reached before the last of the input; the W results come only once it is all read.
"""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the bench package

from bench.throughput_runs import PARTITIONS, Clock, Timing, Where
from framework import App, AppConfig, Record, Sum, Tumbling
from framework.runtime.loop import ProcessorRuntime
from framework.runtime.stats import RuntimeStats

__all__ = ["GUARANTEES", "run", "window_sum_app"]

GUARANTEES = ("exactly-once", "at-least-once")


def window_sum_app(config: AppConfig) -> App:
    """The app: each key's sum per minute of its records' values, from input ``config``'s
    only input topic to its only output topic."""
    app = App(config)

    @app.window(config.inputs[0].topic, Tumbling(timedelta(minutes=1)), Sum(), value_type=int)
    def minute_sum(record: Record[int]) -> int:
        """The value each record adds to its key's minute."""
        return record.value

    return app


def run(where: Where, guarantee: str, clock: Clock, windows: int) -> Timing:
    """Run the app's processor 0 of 1 (app id ``where.group``) until it processed
    ``where.records`` records and emitted ``windows`` results."""
    config = AppConfig.load(
        app_id=where.group,
        kafka={"bootstrap_servers": where.bootstrap},
        inputs=[{"topic": where.topic, "partitions": PARTITIONS}],
        outputs=[{"topic": where.output, "partitions": PARTITIONS}],
        state_dir=str(where.state),
        processing_guarantee=guarantee,
        initial_processors=1,
    )
    runtime = ProcessorRuntime(window_sum_app(config), 0)

    def until(stats: RuntimeStats) -> bool:
        clock.processed(stats.records)
        return stats.records >= where.records and stats.outputs >= windows

    stats = runtime.run(until=until)
    return clock.timing(stats.records)


def main() -> None:
    """Run it and print its ``Timing`` as a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--windows", type=int, required=True, help="window results to emit")
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--group", required=True, help="the app id")
    parser.add_argument("--guarantee", choices=GUARANTEES, required=True)
    parser.add_argument("--started", type=float, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    where = Where(args.bootstrap, args.topic, args.output, args.records, args.state, args.group)
    timing = run(where, args.guarantee, Clock(args.started), args.windows)
    print(timing.line(), flush=True)


if __name__ == "__main__":
    main()
