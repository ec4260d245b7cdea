"""Per-processor state in RocksDB: named stores, atomic offsets, snapshots and SST bulk load."""

__all__: list[str] = []
