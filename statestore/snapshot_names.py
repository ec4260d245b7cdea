"""The names a snapshot store holds, and the checks of those read back from it.

Anyone who may write to the store may have written what a processor reads from it, and a
snapshot's id and its files' names become local and store paths that are written and
deleted. So every one read back must have the form splitstate writes, and nothing else:

- a snapshot's id: ``<created, in ms, 13 digits>-<8 hex>`` (``manifests/<id>.json``,
  ``snapshots/<id>/``);
- a file's name: a RocksDB checkpoint file's name, one path segment of letters, digits,
  ``.``, ``_`` and ``-`` that does not start with a dot (``000012.sst``, ``CURRENT``,
  ``MANIFEST-000005``);
- a file's path in the store (relative to the processor's folder):
  ``files/<lineage>/<name>`` (an SST or blob file) or ``snapshots/<its snapshot's id>/<name>``;
- a lineage: one segment of letters, digits, ``_`` and ``-``;
- a SHA-256: 64 lowercase hex digits;
- an input topic (in a snapshot's offsets, which ``status`` prints): a Kafka topic name, of
  letters, digits, ``.``, ``_`` and ``-``.
"""

from __future__ import annotations

import re
from pathlib import Path

from statestore.errors import StoreCorruptError

__all__ = [
    "check_file_name",
    "check_sha256",
    "check_snapshot_id",
    "check_topic",
    "is_snapshot_id",
    "local_path",
    "store_path_of",
]

_SNAPSHOT_ID = re.compile(r"\d{13}-[0-9a-f]{8}")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,254}")
_LINEAGE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def is_snapshot_id(text: str) -> bool:
    """Whether ``text`` is a snapshot id (``<13 digits>-<8 hex>``)."""
    return _SNAPSHOT_ID.fullmatch(text) is not None


def check_snapshot_id(text: str) -> str:
    """``text`` if it is a snapshot id; ``ValueError`` saying what it must be otherwise."""
    if not is_snapshot_id(text):
        raise ValueError("is not a snapshot id (<13 digits>-<8 lowercase hex digits>)")
    return text


def check_file_name(text: str) -> str:
    """``text`` if it is a snapshot file's name; ``ValueError`` otherwise."""
    if _FILE_NAME.fullmatch(text) is None:
        raise ValueError(
            "is not a plain file name (one path segment of letters, digits, '.', '_' and '-', "
            "not starting with a dot)"
        )
    return text


def check_sha256(text: str) -> str:
    """``text`` if it is a SHA-256 in hex (64 lowercase digits); ``ValueError`` otherwise."""
    if _SHA256.fullmatch(text) is None:
        raise ValueError("is not a SHA-256 (64 lowercase hex digits)")
    return text


def check_topic(text: str) -> str:
    """``text`` if it is a Kafka topic's name; ``ValueError`` otherwise."""
    if _TOPIC.fullmatch(text) is None or text in (".", ".."):
        raise ValueError("is not a Kafka topic name (letters, digits, '.', '_' and '-')")
    return text


def store_path_of(path: str, name: str, snapshot_id: str) -> str:
    """``path`` if it is where splitstate keeps file ``name`` of snapshot ``snapshot_id``
    (``files/<lineage>/<name>`` or ``snapshots/<snapshot_id>/<name>``); ``ValueError``
    otherwise."""
    parts = path.split("/")
    if len(parts) == 3 and parts[2] == name:
        if parts[0] == "files" and _LINEAGE.fullmatch(parts[1]):
            return path
        if parts[0] == "snapshots" and parts[1] == snapshot_id:
            return path
    raise ValueError(
        f"is not where a snapshot keeps its file {name!r} (files/<lineage>/{name} or "
        f"snapshots/{snapshot_id}/{name})"
    )


def local_path(directory: Path, name: str, what: str) -> Path:
    """``directory / name`` for a ``name`` read from the snapshot store (a file's name or a
    snapshot's id; ``what`` says which, for the message). ``StoreCorruptError`` unless it
    is a plain file name: one segment, so the path lies in ``directory``."""
    try:
        check_file_name(name)
    except ValueError as error:
        raise StoreCorruptError(
            f"{what} {name!r:.120} read from the snapshot store {error}: it is not used. Fix: "
            "delete that snapshot's manifest, and check who may write to the snapshot store."
        ) from None
    return directory / name
