"""How splitstate lays out a processor's database: store names and the metadata store.

Besides the user's named stores, every database has the store ``__splitstate`` holding:

- ``offset/<topic>/<partition>`` -> the next input offset to process (ASCII decimal);
- ``progress/<scope>/<topic>/<partition>`` -> offsets of other reads, e.g. a catch-up;
- ``note/<name>`` -> a short text the runtime keeps (e.g. from which scale generation on it
  tracks the handoffs this database completed);
- ``flag/<name>`` -> ``1`` for steps done once (e.g. stale state cleared for a catch-up), and
  ``flag/fresh-directory`` from the database's creation until the runtime has checked that
  nothing the new (or lost) directory should hold lives only elsewhere;
- ``purge/<name>`` -> JSON of a key purge in progress: its spec and where it stopped;
- ``meta`` -> JSON: format version, app id, processor id and the app's fixed parameters;
- ``bulk-load`` -> JSON describing a bulk load in progress (absent otherwise);
- ``crash/attempt`` -> JSON: the input ranges a processor is running its function on now
  (absent between batches), so that a restart knows which records were in flight at a crash;
- ``crash/skipped/<topic>/<partition>/<offset>`` -> JSON about a record skipped because it
  crashed the processor too often.

Everything is text or JSON so that other tools can read it; nothing is pickled.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "BULK_LOAD_KEY",
    "CRASH_ATTEMPT_KEY",
    "CRASH_CATCHUP_ATTEMPT_PREFIX",
    "CRASH_SKIPPED_PREFIX",
    "FORMAT_VERSION",
    "FRESH_DIRECTORY_FLAG",
    "META_KEY",
    "META_STORE",
    "OFFSET_PREFIX",
    "check_store_name",
    "flag_key",
    "note_key",
    "offset_key",
    "offset_prefix",
    "parse_offset_key",
    "processor_path",
    "skipped_key",
]

META_STORE = "__splitstate"
META_KEY = b"meta"
BULK_LOAD_KEY = b"bulk-load"
OFFSET_PREFIX = b"offset/"
CRASH_ATTEMPT_KEY = b"crash/attempt"
#: ``crash/attempt/<catch-up scope>``: what a receiver's catch-up runs the function on now
CRASH_CATCHUP_ATTEMPT_PREFIX = b"crash/attempt/"
CRASH_SKIPPED_PREFIX = b"crash/skipped/"
#: 2: user keys stored behind their bucket prefix (``statestore.key_layout``); 1: plain keys
FORMAT_VERSION = 2
#: set when a database is created, cleared once a run checked what it owned then
FRESH_DIRECTORY_FLAG = "fresh-directory"
_STORE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def offset_prefix(scope: str | None = None) -> bytes:
    """Where offsets of ``scope`` live: input offsets (``None``) or e.g. a catch-up's."""
    return OFFSET_PREFIX if scope is None else f"progress/{scope}/".encode()


def offset_key(topic: str, partition: int, scope: str | None = None) -> bytes:
    """The metadata key of an input partition's offset (in ``scope``)."""
    return offset_prefix(scope) + f"{topic}/{partition}".encode()


def parse_offset_key(key: bytes, scope: str | None = None) -> tuple[str, int]:
    """``(topic, partition)`` of an offset key."""
    topic, _, partition = key[len(offset_prefix(scope)) :].decode().rpartition("/")
    return topic, int(partition)


def skipped_key(topic: str, partition: int, offset: int) -> bytes:
    """The metadata key recording that the record at ``offset`` was skipped after crashes."""
    return CRASH_SKIPPED_PREFIX + f"{topic}/{partition}/{offset:020d}".encode()


def flag_key(name: str) -> bytes:
    """The metadata key of a named flag."""
    return f"flag/{name}".encode()


def note_key(name: str) -> bytes:
    """The metadata key of a named note (a short text, e.g. a generation number)."""
    return f"note/{name}".encode()


def check_store_name(name: str) -> None:
    """Raise ``ValueError`` unless ``name`` can name a store."""
    if not _STORE_NAME.match(name):
        raise ValueError(
            f"invalid store name {name!r}: use 1-100 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )


def processor_path(state_dir: Path, processor: int) -> Path:
    """Where processor ``processor``'s database lives inside an app's state directory."""
    return state_dir / f"processor-{processor}"
