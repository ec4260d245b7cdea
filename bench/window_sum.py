"""Records/s and peak memory of a tumbling 1-minute sum per key: splitstate vs Quix Streams.

One topic of a local broker (4 partitions) gets the input once (``bench/window_input.py``:
1M records by default, 10,000 keys drawn uniformly, JSON int values, Kafka timestamps rising
over an hour of event time; then one closing record per key, value 0 at the end of the last
minute). On it, one after the other, each its own process with its own consumer group (app
id) and output topic, reading from the beginning:

- Quix Streams 3.28.1: ``sdf.tumbling_window(duration_ms=60_000).sum().final()``, its defaults
  (``bench/quix_window_sum.py``, with the Python of a virtualenv this script makes under
  ``.cache/`` when missing: Quix Streams is no dependency of the project);
- splitstate: ``@app.window(topic, Tumbling(timedelta(minutes=1)), Sum(), value_type=int)``
  through the processor runtime, processor 0 of 1, config defaults (``bench/window_sum_runs.py``);

each with ``processing_guarantee`` exactly-once (splitstate's default) and at-least-once
(Quix's default). Both emit each window once, when it closes (no grace). Before any number is
shown, every run's output topic is read back and must hold exactly the expected sums: one
``{"start", "end", "value"}`` per key and minute of the readings, each once, equal to the sum
computed while writing the input.

Like with like: both sides run at their defaults and compute the same results. Quix's
``final()`` closes a key's window by that key's own time only (its default closing strategy
``"key"``), so it never closes a key's last window. splitstate's processors also *tick* their
input partitions (``time.tick_interval``, 1 s): a tick carries the partition's floor (the
largest event time read there) and closes the windows of keys that got no later record. With
the readings alone, splitstate would close many keys' last windows at the end of the input,
or not, as its last tick is read before the run stops or not, and Quix none. The closing
records close every window of the readings by each key's own time, on both sides, so both
emit exactly the same results however the ticks fall, and the ticks' cost stays in
splitstate's numbers. (Turning ticks off for the bench would also make the results equal, but
would measure splitstate without a default part of its runtime; adjusting the expected set
would leave it depending on when a tick is read.) Ticks are records in the input partitions:
each splitstate run appends one or a few to the shared topic after the input, where a reader
meets them. So the Quix rows run first (Quix would read a tick as a record of its input), a
splitstate run reads the earlier runs' ticks after the input (they change nothing: every
window has closed by then), and, as its runtime counts ticks among the records it read, a
splitstate run stops once it has read as many records as were written and emitted every
expected window (its records/s counts those few ticks too).

Columns: records/s is the input records processed after the first moment the run noted (the
splitstate runtime notes it at the end of its first batch, Quix after its first record),
divided by the seconds from that moment until the run returned, all records processed, its last
window results delivered and offsets committed (``bench.throughput_runs.Timing``: the same
for both); records/CPU s divides the same records by the CPU seconds the run's process (all its
threads, librdkafka's too) used in that time: the machine's other work slows records/s, much
less this; start-up is seconds from starting the process to that first moment; peak RSS is the
run process's own (VmHWM of /proc, ``bench.peak_rss``). Compare rows of one run.

Run: .venv/bin/python bench/window_sum.py [--records N] [--keys N] [--minutes N]
[--guarantee exactly-once|at-least-once|both] [--no-quix] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the bench package

from rich.console import Console
from rich.table import Table

from bench.quix_env import QuixPython, quix_python
from bench.scratch import scratch_and_broker
from bench.throughput_runs import PARTITIONS, Timing
from bench.window_input import Sums, produce_readings
from framework.kafka import Clients, TopicSpec

__all__ = ["Run", "check", "main", "read_sums", "run_all"]

HERE = Path(__file__).resolve().parent
SPLITSTATE_RUN = HERE / "window_sum_runs.py"
QUIX_RUN = HERE / "quix_window_sum.py"


@dataclass
class Run:
    """One row: who ran with which guarantee, what it measured (or why not), what it gave."""

    side: str  # "splitstate" or "quix"
    guarantee: str
    timing: Timing | None = None
    why: str = ""
    windows: int = 0
    problems: str = ""

    @property
    def label(self) -> str:
        """The row's name."""
        return f"{self.side} {self.guarantee}"


def read_sums(bootstrap: str, topic: str) -> tuple[Sums, list[str]]:
    """The window results in ``topic`` (committed ones) as sums, and what is wrong with them
    (a result twice, a value that is no window result)."""
    kafka = Clients({"bootstrap.servers": bootstrap})
    sums: Sums = {}
    wrong: list[str] = []
    try:
        for partition in range(PARTITIONS):
            for record in kafka.read_log(topic, partition):
                try:
                    value = json.loads(record.value or b"")
                    start, end, total = int(value["start"]), int(value["end"]), value["value"]
                except (ValueError, KeyError, TypeError) as error:
                    wrong.append(f"{topic}[{partition}]@{record.offset}: not a result ({error})")
                    continue
                key = (record.key or b"", start)
                if key in sums:
                    wrong.append(f"{key!r} emitted twice: {sums[key]} and {(end, total)}")
                sums[key] = (end, total)
    finally:
        kafka.close()
    return sums, wrong


def check(expected: Sums, found: Sums, wrong: Sequence[str]) -> str:
    """What differs between the expected and found sums ("" when they are equal)."""
    missing = expected.keys() - found.keys()
    extra = found.keys() - expected.keys()
    differ = [key for key in expected.keys() & found.keys() if expected[key] != found[key]]
    problems = list(wrong[:3])
    if missing:
        problems.append(f"{len(missing)} windows missing, e.g. {sorted(missing)[:2]}")
    if extra:
        problems.append(f"{len(extra)} windows not expected, e.g. {sorted(extra)[:2]}")
    if differ:
        first = sorted(differ)[0]
        problems.append(
            f"{len(differ)} windows differ, e.g. {first!r}: expected (end, sum) "
            f"{expected[first]}, got {found[first]}"
        )
    if len(wrong) > 3:
        problems.append(f"and {len(wrong) - 3} more wrong records")
    return "; ".join(problems)


def _child(run: Run, command: list[str], timeout: float) -> None:
    """Run one side's process; its last stdout line is its timing as JSON."""
    command = [*command, "--started", repr(time.time())]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        run.why = f"no result within {timeout:.0f}s"
        return
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("{"):
        text = (done.stderr or done.stdout).strip().splitlines()
        run.why = f"exit {done.returncode}: {text[-1][:200] if text else '(no output)'}"
        return
    fields = json.loads(lines[-1])
    fields.pop("version", None)
    run.timing = Timing(**fields)


def run_all(
    bootstrap: str,
    scratch: Path,
    *,
    records: int,
    keys: int,
    minutes: int,
    guarantees: Sequence[str],
    quix: QuixPython | None,
) -> tuple[list[Run], int]:
    """Write the input, run every row one after the other, check each row's results; the
    rows and how many windows were expected."""
    tag = uuid.uuid4().hex[:8]  # every run's topics and groups are new, on any broker
    topic = f"bench-readings-{tag}"
    sides = ["splitstate", *(["quix"] if quix is not None else [])]
    runs = [Run(side, guarantee) for guarantee in guarantees for side in sides]
    outputs = {run.label: f"bench-sums-{run.side}-{run.guarantee}-{tag}" for run in runs}
    kafka = Clients({"bootstrap.servers": bootstrap})
    try:
        kafka.create_topics([TopicSpec(t, PARTITIONS) for t in [topic, *outputs.values()]])
    finally:
        kafka.close()
    start = time.perf_counter()
    readings = produce_readings(bootstrap, topic, records, keys=keys, minutes=minutes)
    took = time.perf_counter() - start
    expected, written = readings.sums, readings.records
    print(
        f"produced {records:,} records in {took:.1f}s ({len(expected):,} windows close), "
        f"and {readings.closing:,} closing records"
    )
    timeout = 600 + records / 500
    for run in sorted(runs, key=lambda r: r.side != "quix"):  # Quix reads no tick (docstring)
        state = scratch / f"{run.side}-{run.guarantee}-state"
        group = f"bench-window-{run.side}-{run.guarantee}-{tag}"
        output = outputs[run.label]
        if run.side == "quix":
            assert quix is not None
            if quix.python is None:
                run.why = f"not run: {quix.why}"
                continue
            command = [str(quix.python), str(QUIX_RUN), bootstrap, topic, output, str(written)]
            command += [str(state), "--group", group, "--guarantee", run.guarantee]
        else:
            command = [sys.executable, str(SPLITSTATE_RUN), "--bootstrap", bootstrap]
            command += ["--topic", topic, "--output", output, "--records", str(written)]
            command += ["--windows", str(len(expected))]
            command += ["--state", str(state), "--group", group, "--guarantee", run.guarantee]
        print(f"running {run.label} ...", flush=True)
        _child(run, command, timeout)
        if run.timing is not None:
            found, wrong = read_sums(bootstrap, output)
            run.windows = len(found)
            run.problems = check(expected, found, wrong)
    return runs, len(expected)


def table(runs: Sequence[Run], quix_version: str) -> Table:
    """The rows, each splitstate row with its records/s (and per CPU second) over Quix's of
    the same guarantee."""
    quix = {
        run.guarantee: run.timing
        for run in runs
        if run.side == "quix" and run.timing and run.timing.records > 0
    }
    grid = Table(title="tumbling 1-minute sum per key")
    columns = ["run", "records/s", "/ Quix", "records/CPU s", "/ Quix", "start-up s", "stop s"]
    for name in [*columns, "peak RSS MB", "windows"]:
        grid.add_column(name, justify="left" if name == "run" else "right", no_wrap=True)
    for run in runs:
        label = f"Quix Streams {quix_version}" if run.side == "quix" else "splitstate"
        label += f", {run.guarantee}"
        t = run.timing
        if t is None:
            grid.add_row(label, run.why)
            continue
        if t.records <= 0:
            grid.add_row(label, "n/a: all in its first batch")
            continue
        base = quix.get(run.guarantee) if run.side == "splitstate" else None
        grid.add_row(
            label,
            f"{t.rate:,.0f}",
            _ratio(t.rate, base.rate if base else 0.0),
            f"{t.cpu_rate:,.0f}" if t.cpu_rate else "",
            _ratio(t.cpu_rate, base.cpu_rate if base else 0.0),
            f"{t.startup:.2f}",
            f"{t.stop:.2f}",
            f"{t.rss_kib / 1024:.0f}",
            f"{run.windows:,}",
        )
    return grid


def _ratio(top: float, bottom: float) -> str:
    return f"{top / bottom:.2f}x" if top and bottom else ""


def main() -> None:
    """Set up, run every row, check the results, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000, help="input records")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys")
    parser.add_argument("--minutes", type=int, default=60, help="minutes of event time")
    parser.add_argument(
        "--guarantee", choices=["exactly-once", "at-least-once", "both"], default="both"
    )
    parser.add_argument("--no-quix", action="store_true", help="run splitstate only")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    args = parser.parse_args()
    if args.records < 1 or args.keys < 1 or args.minutes < 1:
        parser.error("--records, --keys and --minutes must be at least 1")
    logging.basicConfig(level=logging.WARNING)
    guarantees = ["exactly-once", "at-least-once"] if args.guarantee == "both" else [args.guarantee]
    quix = None if args.no_quix else quix_python()
    with scratch_and_broker(args.bootstrap, "splitstate-window-sum-") as (scratch, bootstrap):
        runs, expected = run_all(
            bootstrap,
            scratch,
            records=args.records,
            keys=args.keys,
            minutes=args.minutes,
            guarantees=guarantees,
            quix=quix,
        )
    console = Console()
    if not console.is_terminal:
        console = Console(width=140)  # a log or a pipe: the table on one line per row
    wrong = [run for run in runs if run.problems]
    if wrong:
        for run in wrong:
            console.print(f"[red]{run.label}: results differ from the expected sums:[/red]")
            console.print(f"  {run.problems}", markup=False)
        console.print("no numbers shown: the runs did not compute the same sums")
        raise SystemExit(1)
    console.print(table(runs, quix.version if quix is not None else ""))
    console.print(
        f"Every run's output holds the {expected:,} expected window sums, each once. "
        "records/s: input records / seconds from the first record processed until the run "
        "returned (last results delivered, offsets committed); records/CPU s: the same "
        "records / the CPU seconds of the run's process then (all its threads); peak RSS of "
        "the run's process."
    )


if __name__ == "__main__":
    main()
