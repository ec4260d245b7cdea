"""RocksDB writes as the processor makes them (real RocksDB): each store's writes go in key
order (for a cheaper memtable insert) and still mean what they meant in the order given; the
stores' small memtables flush without losing anything."""

from __future__ import annotations

import random
from pathlib import Path

from statestore.rocks import WRITE_BUFFER_BYTES, RocksBackend


def test_a_write_in_key_order_keeps_the_last_of_a_keys_writes(tmp_path: Path) -> None:
    backend = RocksBackend(tmp_path / "db")
    try:
        backend.create_store("counts")
        backend.write({"counts": [(b"b", b"1"), (b"a", b"old"), (b"c", b"3")]})
        # given out of key order, a key written twice (the last wins), one deleted then set,
        # one set then deleted
        backend.write(
            {
                "counts": [
                    (b"z", b"first"),
                    (b"a", None),
                    (b"m", b"2"),
                    (b"z", b"second"),
                    (b"a", b"new"),
                    (b"c", None),
                ]
            }
        )
        assert list(backend.scan("counts")) == [
            (b"a", b"new"),
            (b"b", b"1"),
            (b"m", b"2"),
            (b"z", b"second"),
        ]
    finally:
        backend.close()


def test_many_writes_through_small_memtables_all_read_back_after_a_reopen(
    tmp_path: Path,
) -> None:
    """More than a few memtables' worth of overwrites of the same keys (flushed many times)
    read back as the last writes, before and after the database is opened again."""
    rng = random.Random(7)
    keys = [f"key-{i:05d}".encode() for i in range(5_000)]
    expected: dict[bytes, bytes] = {}
    written = 0
    backend = RocksBackend(tmp_path / "db")
    try:
        backend.create_store("times")
        while written < 4 * WRITE_BUFFER_BYTES:
            batch = []
            for _ in range(2_000):
                key = rng.choice(keys)
                value = rng.randbytes(rng.randrange(20, 200))
                batch.append((key, value))
                expected[key] = value
                written += len(key) + len(value)
            backend.write({"times": batch})
        assert dict(backend.scan("times")) == expected
    finally:
        backend.close()
    again = RocksBackend(tmp_path / "db")
    try:
        assert dict(again.scan("times")) == expected
    finally:
        again.close()
