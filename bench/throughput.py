"""Records/s, start-up and peak memory of wordcount: splitstate vs plain loops and Quix Streams.

Every run reads the same topic (1M records by default, 4 partitions, 10,000 distinct words) of
the same local broker from the beginning, counts each word in RocksDB and sends one JSON output
``{"word", "count"}`` per record to an output topic of its own. The rows:

1. plain loop, flush per batch: confluent-kafka + rocksdict, no framework. Per batch of 2,000:
   count in RocksDB, produce the outputs and wait for their delivery, write the counts and
   offsets in one WriteBatch, commit the group's offsets (async). The same guarantees per batch
   as splitstate at-least-once.
2. plain loop, no per-batch flush: the same without waiting for delivery (it flushes only at
   the end): the fastest simple loop, and weaker (a crash can lose outputs whose offsets were
   committed).
3. splitstate at-least-once: examples/wordcount through the runtime (``framework_run``),
   processor 0 of 1, batches of 2,000, 4 batches in flight (``batch.in_flight``): each
   batch's WriteBatch and group commit follow its outputs' acknowledgement, while the next
   batches are processed. "waiting": ``in_flight: 1``, each batch waits for its outputs
   before the next poll.
4. splitstate exactly-once: the batches in flight share one Kafka transaction (outputs and
   group offsets), committed before their WriteBatches; "waiting": one transaction per batch,
   committed before the next poll.
5. Quix Streams (bench/quix_wordcount.py), changelog on and changelog off
   (``use_changelog_topics``): at-least-once, its default 5 s checkpoints. It runs with the
   Python of bench/.quix-venv, which this script makes when missing (``python -m venv``,
   ``pip install 'quixstreams>=3,<4'``): Quix is no dependency of the project. When it cannot
   be installed or fails, its rows say why.

Each run is a process of its own (bench/throughput_runs.py, or the Quix script), run one after
the other, with its own consumer group. Columns: records/s from the first record processed to
the run's return (last outputs delivered, offsets committed, clients closed), counting the
records after the first moment (batching runs see it at the end of their first batch); start-up
seconds from starting the process (interpreter, imports, clients, group join, state) to the
first record processed; stop seconds from the last record processed to the return (included in
records/s); peak RSS (VmHWM, ``bench.peak_rss``) of that process. Ratios of records/s follow
the table.

Run: .venv/bin/python bench/throughput.py [--records N] [--distinct N] [--bootstrap HOST:PORT]
[--no-quix] [--no-count-header] (``--distinct 1000000``: the memory of a million keys;
``--no-count-header``: the input is written by a plain producer, placed as splitstate places
keys but without the ``splitstate.count`` header, so processors check each key against the
topic's partition-count history instead)
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the bench package

from bench.scratch import scratch_and_broker
from bench.throughput_runs import PARTITIONS, Timing
from bench.words import produce_words
from framework.kafka import Clients, TopicSpec

HERE = Path(__file__).resolve().parent
RUNS = HERE / "throughput_runs.py"
QUIX_APP = HERE / "quix_wordcount.py"
QUIX_VENV = HERE / ".quix-venv"
QUIX_PYTHON = QUIX_VENV / "bin" / "python"
QUIX_REQUIREMENT = "quixstreams>=3,<4"

#: (label, what runs it: a KIND of bench/throughput_runs.py, or quix-changelog / quix-none)
RUN_LIST = [
    ("plain loop, flush per batch", "plain-flush"),
    ("plain loop, no per-batch flush", "plain-no-flush"),
    ("splitstate at-least-once, waiting", "at-least-once-waiting"),
    ("splitstate at-least-once, pipelined", "at-least-once"),
    ("splitstate exactly-once, waiting", "exactly-once-waiting"),
    ("splitstate exactly-once, pipelined", "exactly-once"),
    ("Quix Streams, changelog on", "quix-changelog"),
    ("Quix Streams, changelog off", "quix-none"),
]


@dataclass(frozen=True)
class Row:
    """One run's line: its timing, or why it has none."""

    label: str
    timing: Timing | None
    why: str = ""


def quix_python() -> tuple[Path | None, str]:
    """The Quix venv's Python and Quix's version (made when missing), or None and why not."""
    probe = [str(QUIX_PYTHON), "-c", "import quixstreams; print(quixstreams.__version__)"]
    if QUIX_PYTHON.exists():
        found = subprocess.run(probe, capture_output=True, text=True, check=False)
        if found.returncode == 0:
            return QUIX_PYTHON, found.stdout.strip()
    print(f"installing {QUIX_REQUIREMENT} into {QUIX_VENV} ...", flush=True)
    steps = [
        [sys.executable, "-m", "venv", str(QUIX_VENV)],
        [str(QUIX_PYTHON), "-m", "pip", "install", "--quiet", QUIX_REQUIREMENT],
        probe,
    ]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, check=False, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as error:
            return None, f"{' '.join(step[:3])}: {error}"
        if done.returncode != 0:
            return None, f"{' '.join(step[:3])} failed: {_last_line(done.stderr)}"
    return QUIX_PYTHON, done.stdout.strip()


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:160] if lines else "(no output)"


def run_child(label: str, command: list[str], timeout: float) -> Row:
    """Run one child process; its last stdout line is its timing as JSON."""
    command = [*command, "--started", repr(time.time())]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Row(label, None, f"no result within {timeout:.0f}s")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("{"):
        why = _last_line(done.stderr or done.stdout)
        return Row(label, None, f"exit {done.returncode}: {why}")
    fields = json.loads(lines[-1])
    fields.pop("version", None)
    return Row(label, Timing(**fields))


def run_all(
    bootstrap: str,
    records: int,
    scratch: Path,
    tag: str,
    quix: tuple[Path | None, str],
    *,
    distinct: int = 10_000,
    count_header: bool = True,
) -> list[Row]:
    """Make the topics, write the input once (``distinct`` words; ``count_header``: with the
    ``splitstate.count`` header), run every row one after the other."""
    topic = f"bench-words-{tag}"
    outputs = {kind: f"bench-{kind}-out-{tag}" for _, kind in RUN_LIST}
    kafka = Clients({"bootstrap.servers": bootstrap})
    kafka.create_topics([TopicSpec(name, PARTITIONS) for name in [topic, *outputs.values()]])
    start = time.perf_counter()
    produce_words(bootstrap, topic, records, distinct=distinct, count_header=count_header)
    print(f"produced {records:,} records in {time.perf_counter() - start:.1f}s", flush=True)
    timeout = 600 + records / 500
    python, version = quix
    rows = []
    for name, kind in RUN_LIST:
        label = name
        state = scratch / f"{kind}-state"
        group = f"bench-{kind}-{tag}"
        if kind.startswith("quix"):
            if python is None:
                rows.append(Row(label, None, f"not run: {version}"))
                continue
            label = label.replace("Quix Streams", f"Quix Streams {version}")
            command = [str(python), str(QUIX_APP), bootstrap, topic, outputs[kind]]
            command += [str(records), str(state), "--group", group]
            command += ["--no-changelog"] if kind == "quix-none" else []
        else:
            command = [sys.executable, str(RUNS), kind, "--bootstrap", bootstrap]
            command += ["--topic", topic, "--output", outputs[kind], "--records", str(records)]
            command += ["--state", str(state), "--group", group]
        print(f"running {label} ...", flush=True)
        rows.append(run_child(label, command, timeout))
    return rows


def rate_of(rows: list[Row], *starts: str) -> float | None:
    """The best records/s among the rows whose label starts with one of ``starts``."""
    rates = [
        row.timing.rate
        for row in rows
        if row.timing is not None and row.label.startswith(starts) and row.timing.rate > 0
    ]
    return max(rates) if rates else None


def print_table(rows: list[Row]) -> None:
    """The table, then the ratios."""
    print(f"\n{'run':<40} {'records/s':>10} {'start-up s':>10} {'stop s':>7} {'peak RSS MB':>11}")
    for row in rows:
        if row.timing is None:
            print(f"{row.label:<40} {row.why}")
            continue
        t = row.timing
        print(
            f"{row.label:<40} {t.rate:>10,.0f} {t.startup:>10.2f} {t.stop:>7.2f} "
            f"{t.rss_kib / 1024:>11.0f}"
        )
    at_least = rate_of(rows, "splitstate at-least-once, pipelined")
    exactly = rate_of(rows, "splitstate exactly-once, pipelined")
    print()
    for name, top, bottom in [
        (
            "splitstate at-least-once: pipelined / waiting",
            at_least,
            rate_of(rows, "splitstate at-least-once, waiting"),
        ),
        (
            "splitstate exactly-once: pipelined / waiting",
            exactly,
            rate_of(rows, "splitstate exactly-once, waiting"),
        ),
        (
            "splitstate at-least-once (pipelined) / plain loop (no per-batch flush)",
            at_least,
            rate_of(rows, "plain loop, no per-batch flush"),
        ),
        (
            "splitstate at-least-once (pipelined) / Quix Streams (best of its rows)",
            at_least,
            rate_of(rows, "Quix Streams"),
        ),
        (
            "splitstate exactly-once / at-least-once (pipelined)",
            exactly,
            at_least,
        ),
    ]:
        value = "n/a (a run has no result)" if not top or not bottom else f"{top / bottom:.2f}"
        print(f"{name} = {value}")


def main() -> None:
    """Set up, run every row, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--no-quix", action="store_true", help="skip the Quix Streams rows")
    parser.add_argument(
        "--distinct", type=int, default=10_000, help="distinct words (keys) in the input"
    )
    parser.add_argument(
        "--no-count-header",
        action="store_true",
        help="write the input without the splitstate.count header (a plain producer placing "
        "keys as splitstate does)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    quix = (None, "--no-quix") if args.no_quix else quix_python()
    tag = uuid.uuid4().hex[:8]  # every run's topics and groups are new, on any broker
    with scratch_and_broker(args.bootstrap, "splitstate-throughput-") as (scratch, bootstrap):
        rows = run_all(
            bootstrap,
            args.records,
            scratch,
            tag,
            quix,
            distinct=args.distinct,
            count_header=not args.no_count_header,
        )
    print_table(rows)


if __name__ == "__main__":
    main()
