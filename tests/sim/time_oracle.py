"""The oracle of a timed plan (``Plan.timed``): what one processor computes from the input.

Each key is folded on its own, by the real ``RecordProcessor`` over an in-memory database,
through its *canonical sequence*: the records its function applies (plain and huge ones,
as the input ends up holding them: no marker, no late or special record, nothing of an
aborted transaction) and the ticks of the partitions it lives in at their offsets (by the
registry's history, as far as each tick's writer knew it: ``tick_takes``), in lineage order
(``checks.lineage_order``: the step in force where each lies, then offset; a key has one
home per step). The oracle gives each key's outputs
to ``TIMED`` in the order it emits them, and what its time stores and its ``recent`` value
hold at the end.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from framework.app import App
from framework.coordination.registry import TopicRegistry
from framework.processing import RecordProcessor, StoredMessage
from framework.time.key_clock import TIME_STORE
from framework.time.ticks import is_tick, read_tick, tick_headers
from rebalance import TopicHistory, bucket, key_hash
from statestore import DatabaseIdentity, ProcessorDatabase
from statestore.due_index import DUE_STORE
from tests.sim.app import HUGE, INPUT, make_app, parse
from tests.sim.broker import StoredRecord
from tests.sim.checks import late_records, lineage_order
from tests.sim.compacted import named
from tests.sim.timed_app import TIMED
from tests.sim.world import World

__all__ = ["COMPARED_STORES", "KeyTruth", "oracle_of", "tick_takes", "time_oracle"]

#: the stores whose values at a key's owner must be the oracle's at the end
COMPARED_STORES = (TIME_STORE, DUE_STORE, "recent")
#: the kinds of record the function applies (``tests/sim/app.py``)
_APPLIED = ("", HUGE)


@dataclass
class KeyTruth:
    """What the oracle says of one key."""

    #: its outputs to ``TIMED`` (encoded values), in the order emitted
    outputs: list[bytes] = field(default_factory=list)
    #: what each of ``COMPARED_STORES`` holds for it at the end, as stored (``None``: nothing)
    stores: dict[str, bytes | None] = field(default_factory=dict)
    #: its canonical sequence: ``(partition, offset, "record" | "tick")``
    sequence: list[tuple[int, int, str]] = field(default_factory=list)
    #: anything the oracle itself did not expect (a dead letter)
    problems: list[str] = field(default_factory=list)


def time_oracle(world: World) -> dict[bytes, KeyTruth]:
    """Each key's ``KeyTruth`` (every key with a record the function applies)."""
    entry = TopicRegistry(world.driver).read().get(INPUT)
    history = None if entry is None else entry.history
    initial = world.app.config.inputs[0].partitions
    created = initial if history is None else history.created
    late = late_records(world)
    ticks: list[StoredRecord] = []
    applied: dict[bytes, list[StoredRecord]] = defaultdict(list)
    for record in world.broker.committed_records(INPUT):
        if record.key is None:
            # (the app reads no partition past those the history created)
            if is_tick(record.headers) and record.partition < created:
                ticks.append(record)
            continue
        name = named(record)
        if name is None or (record.partition, record.offset) in late:
            continue
        if parse(name)[2] in _APPLIED:
            applied[record.key].append(record)

    def takes(h: int, tick: StoredRecord) -> bool:
        if history is None:
            return bucket(h, initial, initial) == tick.partition
        read = read_tick(list(tick.headers))
        steps = None if isinstance(read, str) else read.steps
        return tick_takes(history, h, (tick.partition, tick.offset), steps)

    return oracle_of(applied, ticks, takes, lineage_order(world))


def tick_takes(history: TopicHistory, h: int, where: tuple[int, int], steps: int | None) -> bool:
    """Whether key hash ``h`` takes a tick at ``where`` (partition, offset) whose writer knew
    ``history``'s first ``steps`` steps (``None``: all): it lives there by the history cut
    to those steps, and no later step took it away there before the tick (a growth's marker,
    a shrink's drain marker; a later step that brought keys there brings the tick none);
    none when it names more steps than ``history`` has."""
    partition, offset = where
    if steps is not None and steps > len(history.steps):
        return False  # (steps no registry recorded: a dead letter)
    if steps is not None and steps < len(history.steps):
        known = TopicHistory(history.name, history.counts[: steps + 1], history.steps[:steps])
        if partition >= known.created or known.home_at(h, partition, offset) != partition:
            return False
        n = history.initial_partitions
        return all(
            bucket(h, n, history.counts[b.step]) == partition
            for b in history.boundaries(partition)
            if b.offset <= offset and b.step > steps and b.kind in ("marker", "drain")
        )
    return history.home_at(h, partition, offset) == partition


def oracle_of(
    applied: dict[bytes, list[StoredRecord]],
    ticks: list[StoredRecord],
    takes: Callable[[int, StoredRecord], bool],
    order: Callable[[StoredRecord], tuple[int, int]],
) -> dict[bytes, KeyTruth]:
    """Each key's ``KeyTruth`` from the records its function applies (``applied``) and the
    input's ticks, applied to the keys each tick takes (``takes(key hash, tick)``), in
    ``order``."""
    with tempfile.TemporaryDirectory(prefix="splitstate-oracle-") as scratch:
        app = _oracle_app(Path(scratch))
        truths = {}
        for key, records in sorted(applied.items()):
            h = key_hash(key)
            living = [t for t in ticks if takes(h, t)]
            truths[key] = _fold(app, key, sorted([*records, *living], key=order))
    return truths


def _oracle_app(scratch: Path) -> App:
    """The timed app, reading one partition (each key is folded alone)."""
    return make_app(
        scratch,
        partitions=1,
        initial_processors=1,
        max_records=1,
        lease_ms=2000,
        ready_lag=0,
        timed=True,
    )


def _fold(app: App, key: bytes, sequence: list[StoredRecord]) -> KeyTruth:
    """``key``'s truth: ``sequence`` applied one by one by a fresh ``RecordProcessor``."""
    database = ProcessorDatabase.in_memory(DatabaseIdentity("oracle", 0), app.store_specs())
    processor = RecordProcessor(app, {INPUT: 1})
    truth = KeyTruth()
    for offset, record in enumerate(sequence):
        tick = record.key is None
        truth.sequence.append((record.partition, record.offset, "tick" if tick else "record"))
        # (at the oracle's own offsets of its one partition; no count header: the history
        # placed the key already; a tick without the steps it names: it takes the key)
        headers = _unstepped(record.headers) if tick else []
        message = StoredMessage(
            INPUT, 0, offset, record.key, record.value, record.timestamp_ms, headers
        )
        batch = database.begin()
        outputs, dead = processor.process(batch, message)
        batch.commit()
        letters = processor.take_letters() + ([] if dead is None else [dead])
        for letter in letters:
            truth.problems.append(
                f"the oracle made {INPUT}[{record.partition}]@{record.offset} of {key!r} a "
                f"dead letter ({letter.stage}): {letter.reason[:200]}"
            )
        truth.outputs += [o.value or b"" for o in outputs if o.topic == TIMED]
    stored = database.layout.stored(key)
    truth.stores = {name: database.backend.get(name, stored) for name in COMPARED_STORES}
    database.close()
    return truth


def _unstepped(headers: tuple[tuple[str, bytes | None], ...]) -> list[tuple[str, bytes | None]]:
    """A tick's ``headers`` without the history steps it names (kept if it is no tick)."""
    read = read_tick(list(headers))
    if isinstance(read, str):
        return list(headers)
    return list(tick_headers(read.floor, read.wall, read.app))
