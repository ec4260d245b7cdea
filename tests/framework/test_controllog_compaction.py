"""The control log replays to the same state after Kafka compacts it.

Logs are generated the way the system writes them: the app definition and generation 0, then
scales out and in (with inputs grown between them, so that P may exceed N), every handoff's
events in a valid order, and the accidents of real runs: a retried write that landed twice, a
second first start, a racing scale request, a late event of an older generation, a growth
(`expand`) with a scale request racing it. Every record is keyed with ``record_key`` as
``ControlLog.append`` keys it; compaction keeps, per key, only the last record, at the
position of that last occurrence (Kafka's rule, applied to the whole log).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.coordination.control_log import record_key
from rebalance import HandoffEvent
from rebalance.control import AppDefinition, ControlState, Generation, handoff_record

Record = dict[str, Any]

_CATCH_UP = (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP)


def compact(keyed: Sequence[tuple[bytes, Record]]) -> list[Record]:
    """Kafka's compaction: for each key only the last record survives, where it was."""
    last = {key: index for index, (key, _record) in enumerate(keyed)}
    return [record for index, (key, record) in enumerate(keyed) if last[key] == index]


def replay(records: Sequence[Record]) -> ControlState:
    state = ControlState()
    for record in records:
        state = state.apply(record)
    return state


class LogWriter:
    """Writes records as the system does, keeping the state a reader would see."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.keyed: list[tuple[bytes, Record]] = []
        self.state = ControlState()
        self.later: list[Record] = []  # retried writes that land a little later

    def write(self, record: Record, retry: float = 0.08) -> None:
        """Append ``record``; sometimes a retry writes the same fact again."""
        self._land(record)
        if self.rng.random() < retry:
            if self.rng.random() < 0.5:
                self._land(dict(record))
            else:
                self.later.append(dict(record))
        if self.later and self.rng.random() < 0.3:
            self._land(self.later.pop(0))

    def _land(self, record: Record) -> None:
        self.keyed.append((record_key(record), record))
        self.state = self.state.apply(record)


def _request() -> str:
    return uuid.uuid4().hex


def _scale_record(generation: int, processors: int, counts: dict[str, int]) -> Record:
    return {
        "type": "scale",
        "generation": generation,
        "processors": processors,
        "partitions": dict(counts),
        "request": _request(),
    }


def _run_scale(writer: LogWriter, counts: dict[str, int], b: int, finish: bool) -> None:
    rng, state = writer.rng, writer.state
    assert state.generation is not None
    current = state.generation.processors
    choices = [p for p in range(b, min(counts.values()) + 1) if p != current]
    if not choices:
        return
    generation = state.next_generation
    assert generation is not None
    writer.write(_scale_record(generation, rng.choice(choices), counts))
    if rng.random() < 0.2:  # a second `scale` raced this one: same generation, ignored
        writer.write(_scale_record(generation, rng.choice(choices), counts), retry=0.0)
    scale = writer.state.scaling
    if scale is None:
        return
    if generation > 1 and rng.random() < 0.15:  # a late event of the previous generation
        writer.write(handoff_record(generation - 1, 0, 1, HandoffEvent.COMPLETE), retry=0.0)
    pending: dict[tuple[int, int], list[tuple[HandoffEvent, dict[tuple[str, int], int] | None]]]
    pending = {}
    for pair, handoff in scale.handoffs.items():
        released = {position: rng.randint(0, 500) for position in handoff.partitions}
        events: list[tuple[HandoffEvent, dict[tuple[str, int], int] | None]] = [
            (event, None) for event in _CATCH_UP
        ]
        events += [(HandoffEvent.RELEASE, released), (HandoffEvent.COMPLETE, None)]
        pending[pair] = events
    while pending:
        if not finish and rng.random() < 0.05:
            return  # the log ends while this scale is in progress
        if rng.random() < 0.04:  # a receiver stopped (lost history) and says why
            target = rng.choice(sorted(pending))[1]
            stopped = {"type": "stopped", "generation": generation, "processor": target}
            writer.write({**stopped, "reason": "history lost"})
        if rng.random() < 0.03:  # an operator aborts (ignored once anything was released)
            writer.write({"type": "abort", "generation": generation, "reason": "operator"})
            if writer.state.scaling is None:
                return
        pair = rng.choice(sorted(pending))
        event, offsets = pending[pair].pop(0)
        writer.write(handoff_record(generation, pair[0], pair[1], event, offsets))
        if not pending[pair]:
            del pending[pair]


def _run_growth(writer: LogWriter, counts: dict[str, int], b: int, finish: bool) -> None:
    rng = writer.rng
    topic = rng.choice(sorted(counts))
    grown = counts[topic] + rng.randint(1, counts[topic])
    growth = {"type": "growth", "topic": topic, "partitions": grown, "request": _request()}
    writer.write(growth)
    state = writer.state
    if rng.random() < 0.3 and state.generation is not None:  # `scale` raced the growth
        choices = [p for p in range(b, min(counts.values()) + 1)]
        processors = rng.choice(choices)
        upcoming = state.next_generation
        assert upcoming is not None
        writer.write(_scale_record(upcoming, processors, counts), retry=0.0)
    if writer.state.scaling is not None:
        # the state machine let the racing scale in: play it out before the growth ends
        _run_scale_to_end(writer)
    if not finish and rng.random() < 0.2:
        return  # the log ends while the growth is in progress
    counts[topic] = grown
    writer.write({"type": "growth_done", "topic": topic, "partitions": grown})


def _run_scale_to_end(writer: LogWriter) -> None:
    scale = writer.state.scaling
    assert scale is not None
    for (source, target), handoff in scale.handoffs.items():
        offsets = dict.fromkeys(handoff.partitions, 7)
        for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
            writer.write(handoff_record(scale.generation, source, target, event))
        g = scale.generation
        writer.write(handoff_record(g, source, target, HandoffEvent.RELEASE, offsets))
        writer.write(handoff_record(g, source, target, HandoffEvent.COMPLETE))


def generate(rng: random.Random) -> list[tuple[bytes, Record]]:
    """A control log as a run of the system might leave it."""
    writer = LogWriter(rng)
    b = rng.choice([1, 2, 2, 3])
    inputs = {"words": b * rng.choice([1, 2, 4])}
    if rng.random() < 0.4:
        inputs["clicks"] = b * rng.choice([1, 2, 4])
    counts = dict(inputs)
    definition = AppDefinition("app", b, dict(inputs))
    writer.write(definition.to_record())
    if rng.random() < 0.15:  # two first starts raced with different configs: ignored
        other = AppDefinition("app", b, {name: 2 * n for name, n in inputs.items()})
        writer.write(other.to_record(), retry=0.0)
    processors = rng.randint(b, min(counts.values()))
    writer.write(Generation(0, processors).to_record())
    if rng.random() < 0.1:  # the other first start wrote its generation 0 too: ignored
        other_count = rng.randint(b, min(counts.values()))
        writer.write(Generation(0, other_count).to_record(), retry=0.0)
    steps = rng.randint(1, 7)
    for step in range(steps):
        last = step == steps - 1
        roll = rng.random()
        if roll < 0.3:
            _run_growth(writer, counts, b, finish=not last)
        elif roll < 0.9:
            _run_scale(writer, counts, b, finish=not last)
        else:
            writer.write({"type": "metadata_hash", "hash": rng.getrandbits(60)})
    while writer.later:
        writer._land(writer.later.pop(0))
    return writer.keyed


@settings(max_examples=400, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_every_generated_log_replays_the_same_after_compaction(seed: int) -> None:
    keyed = generate(random.Random(seed))
    records = [record for _key, record in keyed]
    full, compacted = replay(records), replay(compact(keyed))
    assert compacted == full, (
        f"seed {seed}: compaction changed the replay; full log: generation "
        f"{full.generation}, scale {full.scale and full.scale.generation}; compacted: "
        f"generation {compacted.generation}, scale {compacted.scale and compacted.scale.generation}"
    )


def _walk(state: ControlState) -> list[Record]:
    """Every handoff of the scale in progress, start to COMPLETE."""
    scale = state.scaling
    assert scale is not None
    g = scale.generation
    records: list[Record] = []
    for (source, target), handoff in sorted(scale.handoffs.items()):
        moved = handoff.partitions
        records += [
            handoff_record(g, source, target, HandoffEvent.START_CATCH_UP),
            handoff_record(g, source, target, HandoffEvent.CAUGHT_UP),
            handoff_record(g, source, target, HandoffEvent.RELEASE, dict.fromkeys(moved, 9)),
            handoff_record(g, source, target, HandoffEvent.COMPLETE),
        ]
    return records


def test_the_issue_example_scale_2_3_5_survives_compaction() -> None:
    counts = {"words": 8}
    records: list[Record] = [
        AppDefinition("wc", 2, counts).to_record(),
        Generation(0, 2).to_record(),
        _scale_record(1, 3, counts),
    ]
    records += _walk(replay(records))
    records.append(_scale_record(2, 5, counts))
    records += _walk(replay(records))
    full = replay(records)
    assert full.generation == Generation(2, 5)
    compacted = replay(compact([(record_key(record), record) for record in records]))
    assert compacted.generation == Generation(2, 5)
    assert compacted.scaling is None
    for processor in range(5):
        assert compacted.owned(processor, counts) == full.owned(processor, counts)
        assert compacted.has_work(processor)
    assert compacted.owned(4, counts) == {("words", 4)}
    assert compacted == full


def test_record_keys_name_the_fact() -> None:
    scale = _scale_record(3, 4, {"words": 8})
    event = handoff_record(3, 0, 2, HandoffEvent.CAUGHT_UP)
    assert record_key(scale).startswith(b"scale/3/")
    assert record_key(event).startswith(b"handoff/3/0/2/CAUGHT_UP/")
    assert record_key(Generation(0, 2).to_record()).startswith(b"generation/0/")
    assert record_key(scale) != record_key(scale)  # each write is its own record
