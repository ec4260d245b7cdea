"""State store throughput, side by side in one run.

Rows: raw rocksdict WriteBatch puts/s (the ceiling), splitstate batch puts/s, raw and
splitstate gets/s, SST bulk load keys/s (write SST files + ingest), and the value serializers
(orjson, stdlib json, pydantic) on a small dict. Keys are 16 bytes, values 100 bytes.

Run: .venv/bin/python bench/statestore.py [--keys N] [--batch N]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and its name would shadow the
# statestore package: drop the folder.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

import orjson  # noqa: E402
from pydantic import BaseModel, TypeAdapter  # noqa: E402
from rocksdict import Options, Rdict, WriteBatch  # noqa: E402

from statestore import DatabaseIdentity, ProcessorDatabase, SstRunWriter, StoreSpec  # noqa: E402

IDENTITY = DatabaseIdentity("bench", 0, {})


def keys_and_value(count: int) -> tuple[list[bytes], str]:
    """``count`` 16-byte keys and a 100-character value (stored as 100 bytes raw)."""
    return [f"key-{i:012d}".encode() for i in range(count)], "v" * 100


def timed(label: str, items: int, function: Callable[[], object]) -> tuple[str, float, float]:
    """Run ``function`` once and return ``(label, items/s, seconds)``."""
    start = time.perf_counter()
    function()
    elapsed = time.perf_counter() - start
    return label, items / elapsed, elapsed


def raw_puts(path: Path, keys: list[bytes], value: bytes, batch_size: int) -> Rdict:
    """The ceiling: rocksdict WriteBatch in raw mode, no framework."""
    db = Rdict(str(path), Options(raw_mode=True))
    for start in range(0, len(keys), batch_size):
        batch = WriteBatch(raw_mode=True)
        for key in keys[start : start + batch_size]:
            batch.put(key, value)
        db.write(batch)
    return db


def our_puts(database: ProcessorDatabase, keys: list[bytes], value: str, batch_size: int) -> None:
    """splitstate batches: set per key, one atomic commit (with an offset) per batch."""
    for start in range(0, len(keys), batch_size):
        batch = database.begin()
        store = batch.store("bench")
        for key in keys[start : start + batch_size]:
            store.set(key, value)
        batch.set_offset("in", 0, start + batch_size)
        batch.commit()


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1000, help="puts per batch (default 1000)")
    args = parser.parse_args()
    keys, value = keys_and_value(args.keys)
    raw_value = value.encode()
    lookups = random.Random(7).sample(keys, min(len(keys), 200_000))
    scratch = Path(tempfile.mkdtemp(prefix="splitstate-bench-"))
    rows = []
    try:
        raw_db: Rdict | None = None

        def run_raw() -> None:
            nonlocal raw_db
            raw_db = raw_puts(scratch / "raw", keys, raw_value, args.batch)

        rows.append(timed("raw rocksdict WriteBatch puts", len(keys), run_raw))
        assert raw_db is not None
        db = raw_db
        rows.append(timed("raw rocksdict gets", len(lookups), lambda: [db[k] for k in lookups]))
        db.close()

        ours = ProcessorDatabase.open(scratch / "ours", IDENTITY, [StoreSpec("bench")])
        rows.append(
            timed(
                "splitstate batch puts",
                len(keys),
                lambda: our_puts(ours, keys, value, args.batch),
            )
        )
        batch = ours.begin()
        store = batch.store("bench")
        rows.append(
            timed("splitstate batch gets", len(lookups), lambda: [store.get(k) for k in lookups])
        )
        batch.abort()

        def bulk() -> None:
            layout = ours.layout
            run = layout.sorted_items((k, value) for k in keys)
            files = SstRunWriter(scratch / "sst", layout=layout).write(run)
            ours.bulk_load({"bench": files}, {("in", 0): len(keys)})

        rows.append(timed("SST bulk load (write + ingest)", len(keys), bulk))
        ours.close()

        sample = {"word": "splitstate", "count": 12345, "seen": [1, 2, 3], "ok": True}
        adapter = TypeAdapter(dict[str, object])

        class Sample(BaseModel):
            word: str
            count: int
            seen: list[int]
            ok: bool

        model = Sample(**sample)  # type: ignore[arg-type]
        model_adapter = TypeAdapter(Sample)
        n = 200_000
        for label, encode_decode in [
            ("orjson dumps+loads (dict)", lambda: orjson.loads(orjson.dumps(sample))),
            ("stdlib json dumps+loads (dict)", lambda: json.loads(json.dumps(sample))),
            (
                "pydantic dump+validate (dict)",
                lambda: adapter.validate_json(adapter.dump_json(sample)),
            ),
            (
                "pydantic dump+validate (model)",
                lambda: model_adapter.validate_json(model_adapter.dump_json(model)),
            ),
        ]:
            rows.append(timed(label, n, lambda f=encode_decode: [f() for _ in range(n)]))  # type: ignore[misc]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"{'operation':<36} {'ops/s':>14} {'seconds':>9}")
    for label, rate, seconds in rows:
        print(f"{label:<36} {rate:>14,.0f} {seconds:>9.2f}")
    ceiling = rows[0][1]
    ours_rate = next(rate for label, rate, _ in rows if label == "splitstate batch puts")
    print(f"\nsplitstate batch puts / raw WriteBatch puts = {ours_rate / ceiling:.2f}")


if __name__ == "__main__":
    main()
