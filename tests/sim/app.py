"""The app every simulated world runs: each key's state is a fold of its records.

Producers write values ``"<producer>:<seq>"`` with ``seq`` counting 1, 2, ... per key and
producer. The processor function keeps, per key, how many records it applied, the last
``seq`` of each producer, and how many records broke a producer's order (a ``seq`` not above
that producer's last: a double apply or a reorder). It emits ``[producer, seq, count,
topic, partition, offset]`` for every record, so the checks can see which record each
output came from.

Some plans also write *special* records, ``"<producer>:<seq>:<kind>"``:

- ``poison``: the function changes the state it read in place, then raises. The record
  must become a dead letter and leave the state as it was (its ``seq`` is never applied);
- ``huge``: the function applies the record, then returns an output too large for Kafka.
  The state counts the record; the output must become a dead letter, never fail the batch;
- ``killer``: the process dies while the function runs on it, every time (``die``). After
  ``crash_limit`` crashes the record must be skipped as a dead letter, by the old owner and by
  a receiver's catch-up alike, and never applied.

An app whose input is compacted (``latest``: compaction removes records, so no count of them
can be rebuilt) keeps each key's latest value instead: ``{"v": "<producer>:<seq>"}``, and a
*delete* (a null value naming its ``"<producer>:<seq>"`` in the ``DELETE_HEADER`` header)
removes it. It emits ``[producer, seq, previous, topic, partition, offset]``: ``previous`` is
the value the key had before the record (``None``: none). A null record without that header
is one the function must never get (a compaction tombstone, ``splitstate.compaction``): it
emits ``COMPACTION_APPLIED`` as its producer.

A *timed* app (``timed``) also keeps time per key: windows, timers and a ttl, their results
to a second output topic (``tests/sim/timed_app.py``); its fold outputs name ``OUTPUT``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from framework import App, AppConfig, BatchConfig, KafkaConfig, KeyState, Output, Record
from framework.config import ScalingConfig, SnapshotConfig, TopicConfig
from tests.sim.timed_app import TIMED, add_time

__all__ = [
    "COMPACTION_APPLIED",
    "DELETE_HEADER",
    "HUGE",
    "INPUT",
    "KILLER",
    "OUTPUT",
    "POISON",
    "FoldState",
    "make_app",
    "names_input",
    "parse",
]

INPUT = "sim-in"
OUTPUT = "sim-out"
POISON = "poison"
HUGE = "huge"
KILLER = "killer"
#: the header naming a delete's ``"<producer>:<seq>"`` (its value is null)
DELETE_HEADER = "sim.delete"
#: the producer an output names when the function got a compaction tombstone
COMPACTION_APPLIED = "compaction-tombstone-applied"

#: the size of a ``huge`` record's output: above the producer's largest record
_HUGE_BYTES = 1_100_000

#: ``{"n": records applied, "last": {producer: last seq}, "bad": order violations}``
FoldState = dict[str, Any]


def parse(value: str) -> tuple[str, int, str]:
    """``(producer, seq, kind)`` of a record's value (``kind`` is ``""`` for a plain one)."""
    producer, seq, *kind = value.split(":")
    return producer, int(seq), kind[0] if kind else ""


def fold(state: FoldState | None, producer: str, seq: int) -> FoldState:
    """``state`` after one more record, number ``seq`` of ``producer``."""
    current: FoldState = state or {"n": 0, "last": {}, "bad": 0}
    last = dict(current["last"])
    bad = current["bad"] + (1 if seq <= last.get(producer, 0) else 0)
    last[producer] = max(seq, last.get(producer, 0))
    return {"n": current["n"] + 1, "last": last, "bad": bad}


def make_app(
    state_dir: Path,
    *,
    partitions: int,
    initial_processors: int,
    max_records: int,
    lease_ms: int,
    ready_lag: int,
    die: Callable[[], NoReturn] | None = None,
    outputs: bool = True,
    snapshots: bool = False,
    exactly_once: bool = False,
    in_flight: int = 1,
    latest: bool = False,
    timed: bool = False,
) -> App:
    """The fold app over ``partitions`` input partitions (``outputs``: with an output topic;
    without one the function returns nothing; ``snapshots``: processors take snapshots, join
    by them and restore a lost directory from them, else they replay; ``exactly_once``: outputs
    in a transaction per batch; ``in_flight``: batches processed ahead of their commit;
    ``latest``: the function keeps each key's latest value, see the module; ``timed``: it
    keeps time too, ``tests/sim/timed_app.py``)."""
    config = AppConfig(
        app_id="sim",
        kafka=KafkaConfig(bootstrap_servers="simulated:9092"),
        inputs=[
            TopicConfig(
                topic=INPUT,
                partitions=partitions,
                producer_lease_ms=lease_ms,
                # three leases, as the defaults (10 s and 30 s), and much longer than `expand`'s
                # 1 s margin: a producer that misuses counts past its lease can land after
                # the fence
                producer_delivery_timeout_ms=3 * lease_ms,
            )
        ],
        outputs=[
            TopicConfig(topic=topic, partitions=2)
            for topic in ([OUTPUT, TIMED] if timed else [OUTPUT] if outputs else [])
        ],
        initial_processors=initial_processors,
        processors=initial_processors,
        state_dir=state_dir,
        batch=BatchConfig(max_records=max_records, max_wait_ms=20, in_flight=in_flight),
        scaling=ScalingConfig(ready_lag=ready_lag, catchup_batch=max(1, max_records)),
        bootstrap="snapshot" if snapshots else "replay",
        processing_guarantee="exactly-once" if exactly_once else "at-least-once",
        # often, and copied in small slices, so that kills meet every step of them
        snapshots=SnapshotConfig(
            enabled=snapshots,
            interval_seconds=3.0,
            interval_records=30,
            keep=2,
            slice_bytes=1024,
        ),
    )
    app = App(config)
    app.store("folds")
    if latest:
        _keep_latest(app, die, outputs)
        return app
    if timed:
        add_time(app, fold_function(die, outputs, topic=OUTPUT))
        return app
    app.processor()(fold_function(die, outputs))
    return app


def fold_function(
    die: Callable[[], NoReturn] | None, outputs: bool, topic: str | None = None
) -> Callable[[Record[bytes | None], KeyState[FoldState]], Output | None]:
    """The function that folds a record into its key's state (``outputs``: and says so, to
    ``topic``; default: the only output topic)."""

    def apply(record: Record[bytes | None], state: KeyState[FoldState]) -> Output | None:
        """Fold the record into its key's state and say so."""
        producer, seq, kind = parse((record.value or b"").decode())
        if kind == KILLER:
            assert die is not None, "a killer record needs a world to die in"
            die()
        if kind == POISON:
            held = state.get()
            if held is not None:  # changed in place, then the function fails
                held["n"] += 1000
                held["last"][producer] = -seq
            raise ValueError(f"record {producer}:{seq} is poison")
        new = fold(state.get(), producer, seq)
        state.set(new)
        if not outputs:
            return None
        where = [record.topic, record.partition, record.offset]
        if kind == HUGE:
            return Output([producer, seq, new["n"], *where, "x" * _HUGE_BYTES], topic=topic)
        return Output([producer, seq, new["n"], *where], topic=topic)

    return apply


def _keep_latest(app: App, die: Callable[[], NoReturn] | None, outputs: bool) -> None:
    """The function of an app whose input is compacted (see the module)."""

    @app.processor()
    def keep_latest(record: Record[bytes | None], state: KeyState[FoldState]) -> Output | None:
        """Keep the record's value as its key's (delete it for a delete) and say so."""
        held = state.get()
        previous = None if held is None else held["v"]
        if record.value is None:
            named = dict(record.headers).get(DELETE_HEADER)
            if named is None:  # never given to the function: a compaction tombstone
                state.delete()
                where = [record.topic, record.partition, record.offset]
                return Output([COMPACTION_APPLIED, 0, previous, *where]) if outputs else None
            producer, seq, kind = parse(named.decode())
        else:
            producer, seq, kind = parse(record.value.decode())
        if kind == KILLER:
            assert die is not None, "a killer record needs a world to die in"
            die()
        if kind == POISON:
            if held is not None:  # changed in place, then the function fails
                held["v"] = "poisoned"
            raise ValueError(f"record {producer}:{seq} is poison")
        if record.value is None:
            state.delete()
        else:
            state.set({"v": f"{producer}:{seq}"})
        if not outputs:
            return None
        where = [record.topic, record.partition, record.offset]
        if kind == HUGE:
            return Output([producer, seq, previous, *where, "x" * _HUGE_BYTES])
        return Output([producer, seq, previous, *where])


def names_input(key: bytes | None) -> bool:
    """Whether a topic-registry record's key names the input (``TOPIC/ID``, or the topic alone
    as an older splitstate wrote it)."""
    return key is not None and key.split(b"/", 1)[0] == INPUT.encode()
