"""State and outputs never depend on how records are cut into batches (issue 12, defect 5).

The runtime, the catch-up and the Spark fold run the same records through ``RecordProcessor``
with different batch sizes. A function may read a list/dict state, mutate it in place, call
``set`` or not, and raise after mutating: only ``set``/``delete`` of records that succeed may
change state, so every batch size must end with the same state and the same outputs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from framework import App, AppConfig, Output, Record
from framework.processing import RecordProcessor, StoredMessage
from statestore import DatabaseIdentity, KeyState, ProcessorDatabase


class Bag(BaseModel):
    """A typed state value with mutable fields."""

    items: list[int] = Field(default_factory=list)
    names: dict[str, int] = Field(default_factory=dict)


class StepError(Exception):
    """What a step ``raise`` raises."""


app = App(
    AppConfig.load(
        None,
        app_id="batch-independence",
        inputs=[{"topic": "plain"}, {"topic": "both"}],
        outputs=[{"topic": "out"}],
        initial_processors=1,
    )
)
app.store("plain")
app.store("model", Bag)


def _fresh(store: str) -> Any:
    return Bag() if store == "model" else {"items": [], "names": {}}


def _parts(value: Any) -> tuple[list[int], dict[str, int]]:
    if isinstance(value, Bag):
        return value.items, value.names
    items: list[int] = value["items"]
    names: dict[str, int] = value["names"]
    return items, names


def _run_steps(states: dict[str, KeyState[Any]], steps: list[list[Any]]) -> Output:
    """Interpret ``steps``: read, mutate in place, set, delete or raise, on the named store."""
    working = {name: state.get() or _fresh(name) for name, state in states.items()}
    for op, name, number in steps:
        state, value = states[name], working[name]
        items, names = _parts(value)
        if op == "append":
            items.append(number)
        elif op == "setitem":
            names[str(number)] = number
            if items:
                items[0] = number
        elif op == "pop":
            if items:
                items.pop()
            if names:
                names.pop(next(iter(names)))
        elif op == "set":
            state.set(value)
        elif op == "get":
            working[name] = state.get() or _fresh(name)
        elif op == "delete":
            state.delete()
        elif op == "raise":
            raise StepError(f"step raise after mutating {name}")
    seen = {
        name: value.model_dump() if isinstance(value, Bag) else value
        for name, value in working.items()
    }
    return Output(seen)


@app.processor("plain", value_type=dict, stores=["plain"])
def plain(record: Record[dict[str, Any]], state: KeyState[Any]) -> Output:
    """One JSON store."""
    return _run_steps({"plain": state}, record.value["steps"])


@app.processor("both", value_type=dict, stores=["plain", "model"])
def both(record: Record[dict[str, Any]], states: dict[str, KeyState[Any]]) -> Output:
    """A JSON store and a typed store."""
    return _run_steps(states, record.value["steps"])


OPS = ["append", "setitem", "pop", "set", "get", "delete", "raise"]
WEIGHTS = st.sampled_from(OPS[:3] * 3 + ["set"] * 2 + OPS[4:])


@st.composite
def records(draw: st.DrawFn) -> tuple[str, bytes, bytes]:
    topic = draw(st.sampled_from(["plain", "both"]))
    stores = ["plain"] if topic == "plain" else ["plain", "model"]
    steps = draw(
        st.lists(
            st.tuples(WEIGHTS, st.sampled_from(stores), st.integers(0, 9)).map(list),
            max_size=7,
        )
    )
    key = draw(st.sampled_from([b"a", b"b", b"c"]))
    return topic, key, orjson.dumps({"steps": steps})


Result = tuple[dict[str, dict[bytes, bytes]], list[tuple[str, bytes, bytes | None]], list[int]]


def _database(kind: str, directory: Path) -> ProcessorDatabase:
    identity = DatabaseIdentity("batch-independence", 0)
    if kind == "rocksdb":
        return ProcessorDatabase.open(directory / "processor-0", identity, app.store_specs())
    return ProcessorDatabase.in_memory(identity, app.store_specs())


def run(inputs: list[tuple[str, bytes, bytes]], size: int, kind: str, directory: Path) -> Result:
    """Process ``inputs`` in batches of ``size``; the final state, outputs and failures."""
    processor = RecordProcessor(app)
    outputs: list[tuple[str, bytes, bytes | None]] = []
    failed: list[int] = []
    with _database(kind, directory) as database:
        for start in range(0, len(inputs), size):
            batch = database.begin()
            for offset in range(start, min(start + size, len(inputs))):
                topic, key, value = inputs[offset]
                message = StoredMessage(topic, 0, offset, key, value, None, None)
                produced, dead = processor.process(batch, message)
                outputs.extend((o.topic, o.key, o.value) for o in produced)
                if dead is not None:
                    failed.append(dead.offset)
                batch.set_offset(topic, 0, offset + 1)
            batch.commit()
        user = database.layout.user  # the raw bytes stored, under the user's keys
        state = {
            name: {user(k): v for k, v in database.backend.scan(name)}
            for name in database.store_names()
        }
    return state, outputs, failed


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=st.lists(records(), min_size=1, max_size=14))
def test_state_and_outputs_do_not_depend_on_batch_size(
    inputs: list[tuple[str, bytes, bytes]],
) -> None:
    with tempfile.TemporaryDirectory(prefix="batch-independence-") as directory:
        expected = run(inputs, 1, "memory", Path(directory) / "memory-1")
        for kind in ("memory", "rocksdb"):
            for size in sorted({1, 3, len(inputs)}):
                got = run(inputs, size, kind, Path(directory) / f"{kind}-{size}")
                assert got == expected, f"{kind} backend, batches of {size}"


def test_mutating_a_read_value_without_set_changes_nothing() -> None:
    """The example from the issue: mutate, raise; the same records, batch size 3 and 1."""
    steps_ok = orjson.dumps({"steps": [["append", "plain", 1], ["set", "plain", 0]]})
    steps_fail = orjson.dumps({"steps": [["append", "plain", 2], ["raise", "plain", 0]]})
    steps_read = orjson.dumps({"steps": [["append", "plain", 3]]})  # mutates, never sets
    inputs = [("plain", b"k", steps_ok), ("plain", b"k", steps_fail), ("plain", b"k", steps_read)]
    with tempfile.TemporaryDirectory() as directory:
        one = run(inputs, 1, "memory", Path(directory) / "one")
        three = run(inputs, 3, "memory", Path(directory) / "three")
    assert orjson.loads(one[0]["plain"][b"k"]) == {"items": [1], "names": {}}
    assert three == one
