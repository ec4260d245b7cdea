"""`splitstate state dump|offsets` as a user runs them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec
from tests.integration.harness import splitstate
from tests.statestore.conftest import Account


def make_state(state_dir: Path) -> None:
    stores = [StoreSpec("counts"), StoreSpec("accounts", Account)]
    for j in (0, 1):
        identity = DatabaseIdentity("cli-app", j, {"initial_processors": 2})
        with ProcessorDatabase.open(state_dir / f"processor-{j}", identity, stores) as db:
            batch = db.begin()
            batch.store("counts").set(f"word-{j}".encode(), {"count": j + 1})
            batch.store("counts").set(b"\xff\xfe", 7)
            batch.store("accounts").set(b"acc", Account(owner="ada", balance=j))
            batch.set_offset("words", j, 100 + j)
            batch.commit()


def test_dump_prints_json_lines(tmp_path: Path) -> None:
    make_state(tmp_path)
    result = splitstate("state", "dump", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert {"processor": 0, "store": "counts", "key": "word-0", "value": {"count": 1}} in lines
    assert {"processor": 1, "store": "counts", "key": "word-1", "value": {"count": 2}} in lines
    binary = [line for line in lines if line.get("key_encoding") == "base64"]
    assert len(binary) == 2
    assert base64.b64decode(binary[0]["key"]) == b"\xff\xfe"
    assert {
        "processor": 1,
        "store": "accounts",
        "key": "acc",
        "value": {"owner": "ada", "balance": 1},
    } in lines
    assert len(lines) == 6


def test_dump_filters_by_store_and_processor(tmp_path: Path) -> None:
    make_state(tmp_path)
    result = splitstate(
        "state", "dump", "--dir", str(tmp_path), "--store", "accounts", "--processor", "1"
    )
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"processor": 1, "store": "accounts", "key": "acc", "value": {"owner": "ada", "balance": 1}}
    ]


def test_offsets(tmp_path: Path) -> None:
    make_state(tmp_path)
    result = splitstate("state", "offsets", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"processor": 0, "topic": "words", "partition": 0, "offset": 100},
        {"processor": 1, "topic": "words", "partition": 1, "offset": 101},
    ]


def test_bad_directory_and_store_are_clear_errors(tmp_path: Path) -> None:
    missing = splitstate("state", "dump", "--dir", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr and "--dir" in missing.stderr
    make_state(tmp_path)
    bad_store = splitstate("state", "dump", "--dir", str(tmp_path), "--store", "nope")
    assert bad_store.returncode == 2
    assert "has no store 'nope'; its stores: ['accounts', 'counts']" in bad_store.stderr
    assert "Traceback" not in bad_store.stderr
