"""``splitstate state dump`` of an app that keeps time: each key's time record and due times
are shown readably (they are bytes: ``splitstate.time`` JSON, ``splitstate.due`` 16 raw
bytes), beside its other state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from framework import Record
from framework.processing import RecordProcessor, StoredMessage
from framework.time import KeyTimers, Session, Sum, Timer
from framework.time.key_clock import TIME_STORE, KeyClock
from statestore import DatabaseIdentity, ProcessorDatabase
from statestore.dump import dump_records
from tests.framework.time.apps import new_app
from tests.integration.harness import splitstate


def make_state(state_dir: Path) -> None:
    """A time app's state on RocksDB: keys ``k`` and ``\\xff``, each with an open session,
    timers and a value that expires."""
    app = new_app(partitions=1)
    app.store("seen", ttl=100)
    app.windows_store("sums", Session(10), Sum())

    @app.timer("alarm")
    def ring(timer: Timer, state: Any) -> None:
        return None

    @app.processor("in", dict, ["seen", "sums", "alarm"])
    def handle(record: Record[dict[str, Any]], state: dict[str, Any]) -> None:
        state["seen"].set(record.value["v"])
        state["sums"].add(record.value["v"])
        timers: KeyTimers = state["alarm"]
        timers.set(500, "event")
        timers.set_wall(900, "wall")

    identity = DatabaseIdentity("time-unit", 0)
    with ProcessorDatabase.open(state_dir / "processor-0", identity, app.store_specs()) as db:
        processor = RecordProcessor(app, {"in": 1})
        batch = db.begin()
        for offset, (key, at) in enumerate([(b"k", 40), (b"k", 45), (b"\xff", 7)]):
            message = StoredMessage("in", 0, offset, key, b'{"v": 2}', at, [])
            processor.process(batch, message)
        batch.set_offset("in", 0, 3)
        batch.commit()


def test_time_records_and_due_times_are_shown_readably(tmp_path: Path) -> None:
    make_state(tmp_path)
    readers = {TIME_STORE: KeyClock.readable}  # (as the CLI reads them)
    lines = {(r["store"], r["key"]): r for r in dump_records(tmp_path, readers=readers)}
    due = lines[("splitstate.due", "k")]["value"]
    assert due == {"event": 55, "wall": 900}  # the session [40, 45] closes at 45 + 10
    assert lines[("splitstate.due", "/w==")] == {
        "processor": 0,
        "store": "splitstate.due",
        "key": "/w==",
        "key_encoding": "base64",
        "value": {"event": 17, "wall": 900},
    }
    time = lines[("splitstate.time", "k")]["value"]
    assert time == {
        "time": 45,
        "times": {"in": 45},
        "floor": None,
        "wall": None,
        "timers": {
            "alarm": {"event": {"due": 500, "kind": "event"}, "wall": {"due": 900, "kind": "wall"}}
        },
        "windows": {"sums": [[40, 45, 4]]},
        "expiries": {"seen": 145},
    }
    assert lines[("seen", "k")]["value"] == 2
    raw = {(r["store"], r["key"]): r["value"] for r in dump_records(tmp_path)}
    assert raw[("splitstate.time", "k")]["w"] == {"sums": [[40, 45, 4]]}  # its JSON as stored


def test_the_cli_prints_them(tmp_path: Path) -> None:
    make_state(tmp_path)
    result = splitstate("state", "dump", "--dir", str(tmp_path), "--store", "splitstate.due")
    assert result.returncode == 0, result.stderr
    shown = {line["key"]: line["value"] for line in map(json.loads, result.stdout.splitlines())}
    assert shown == {"k": {"event": 55, "wall": 900}, "/w==": {"event": 17, "wall": 900}}
    result = splitstate("state", "dump", "--dir", str(tmp_path), "--store", "splitstate.time")
    assert result.returncode == 0, result.stderr
    shown = {
        json.loads(line)["key"]: json.loads(line)["value"] for line in result.stdout.splitlines()
    }
    assert shown["k"]["windows"] == {"sums": [[40, 45, 4]]}
    assert shown["/w=="]["time"] == 7


def test_a_damaged_time_record_is_shown_as_bytes() -> None:
    assert KeyClock.readable(b"\x00not json") == {"unreadable": "AG5vdCBqc29u"}
