"""Per-processor state in RocksDB: named stores, atomic offsets, snapshots and SST bulk load.

Layers: ``ProcessorDatabase`` (one per processor) -> named stores (column families) ->
``StateBatch`` (one processed batch's writes plus its input offsets, committed atomically) ->
``KeyState`` (one record key's value: all a processor function sees).
"""

from statestore.batch import BatchStatus, KeyState, StateBatch, StoreBatch
from statestore.codec import Codec, JsonCodec, TypedCodec, codec_for
from statestore.database import ProcessorDatabase
from statestore.errors import (
    BatchStateError,
    StateStoreError,
    StoreConflictError,
    StoreCorruptError,
    StoreLockedError,
)
from statestore.identity import DatabaseIdentity, StoreSpec
from statestore.layout import META_STORE, processor_path
from statestore.purge import KeyPurge, pending_purges, start_purge
from statestore.sst import SstRunWriter, write_sst_file

__all__ = [
    "META_STORE",
    "BatchStateError",
    "BatchStatus",
    "Codec",
    "DatabaseIdentity",
    "JsonCodec",
    "KeyPurge",
    "KeyState",
    "ProcessorDatabase",
    "SstRunWriter",
    "StateBatch",
    "StateStoreError",
    "StoreBatch",
    "StoreConflictError",
    "StoreCorruptError",
    "StoreLockedError",
    "StoreSpec",
    "TypedCodec",
    "codec_for",
    "pending_purges",
    "processor_path",
    "start_purge",
    "write_sst_file",
]
