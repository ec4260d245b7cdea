"""A snapshot's manifest: whose state it is, which input offsets it covers, and its files.

The manifest is the last thing a snapshot writes to the snapshot store, so a snapshot whose
manifest exists is complete. It is JSON (never pickle) so that other tools can read it:

- ``app_id``, ``processor``, ``fixed``: the database's identity (``DatabaseIdentity``);
- ``id``: ``<created, in ms, 13 digits>-<8 hex>``: manifests sort by it, oldest first;
- ``generation``: the newest scale generation the processor had read when it took it;
- ``offsets``: per input partition the processor owned then, the next offset its state
  needs: the state holds exactly the records before it (and, for its keys, every record of
  an ancestor partition up to the growth threshold, which the processor owns or had read);
- ``files``: every file of the RocksDB checkpoint, with where it lies in the store (relative
  to the processor's folder), its size and its SHA-256;
- ``request``: the operator's request it answers (``splitstate snapshot take``), or null;
- ``epoch``: the epoch of the app's control log then: a snapshot serves only that epoch (an
  app started over, with a new control log, never restores or transfers an old one);
- ``instance``: the run of the processor that took it (its ``instance`` in the control log;
  a run takes no snapshot once the log names a newer run of its processor).

A manifest read back from the store is refused (``StoreCorruptError``, naming what is wrong)
unless every field has the form and type splitstate writes (``statestore.snapshot_names``):
its id and its files' names and paths become paths that are written and deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    model_validator,
)

from statestore.errors import StoreCorruptError
from statestore.layout import FORMAT_VERSION
from statestore.snapshot_names import (
    check_file_name,
    check_sha256,
    check_snapshot_id,
    check_topic,
    store_path_of,
)

__all__ = ["MANIFEST_FORMAT", "SnapshotFile", "SnapshotManifest"]

MANIFEST_FORMAT = 1
Position = tuple[str, int]


@dataclass(frozen=True)
class SnapshotFile:
    """One file of a snapshot: its name in the checkpoint, its path in the store, its size
    and SHA-256 (hex)."""

    name: str
    path: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        """The file as stored in the manifest."""
        return {"name": self.name, "path": self.path, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class SnapshotManifest:
    """A complete snapshot of one processor's database (see the module docstring)."""

    app_id: str
    processor: int
    fixed: Mapping[str, Any]
    id: str
    created: float
    generation: int
    offsets: Mapping[Position, int]
    files: tuple[SnapshotFile, ...] = field(default=())
    #: the operator's request it answers (``splitstate snapshot take``), if any
    request: str | None = None
    #: the epoch of the app's control log when it was taken (an app started over has another)
    epoch: str | None = None
    #: the state format of the database it copies (``statestore.layout.FORMAT_VERSION``)
    state_format: int = FORMAT_VERSION
    #: the run of the processor that took it (``None``: taken before snapshots named it)
    instance: str | None = None

    @property
    def size(self) -> int:
        """Bytes of all its files."""
        return sum(f.size for f in self.files)

    def belongs_to(self, app_id: str, fixed: Mapping[str, Any], epoch: str | None) -> bool:
        """Whether it is a snapshot of app ``app_id`` with these fixed parameters, taken in
        this history of its control log (``epoch``), in this splitstate's state format: the
        only ones a restore or transfer uses."""
        return (
            self.app_id == app_id
            and dict(self.fixed) == dict(fixed)
            and self.epoch == epoch
            and self.state_format == FORMAT_VERSION
        )

    def covers(self, partitions: Iterable[Position]) -> bool:
        """Whether the processor owned every one of ``partitions`` when it took the snapshot."""
        return all(p in self.offsets for p in partitions)

    def to_json(self) -> dict[str, Any]:
        """The manifest as written to the store."""
        return {
            "format": MANIFEST_FORMAT,
            "app_id": self.app_id,
            "processor": self.processor,
            "fixed": dict(self.fixed),
            "id": self.id,
            "created": self.created,
            "generation": self.generation,
            "offsets": [[t, p, o] for (t, p), o in sorted(self.offsets.items())],
            "files": [f.to_json() for f in self.files],
            "request": self.request,
            "epoch": self.epoch,
            "state_format": self.state_format,
            "instance": self.instance,
        }

    def encode(self) -> bytes:
        """The manifest's JSON bytes."""
        return json.dumps(self.to_json(), indent=1, sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes, where: str) -> SnapshotManifest:
        """Read a manifest; raises ``StoreCorruptError`` naming ``where`` and what is wrong
        if it is not one in the form splitstate writes (``statestore.snapshot_names``)."""
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise ValueError(f"it holds {_json_kind(data)}, not a JSON object")
            if data.get("format") != MANIFEST_FORMAT:
                raise ValueError(f"format {data.get('format')!r}, this splitstate reads 1")
            read = _ManifestJson.model_validate_json(raw)
        except ValidationError as error:
            problems = "; ".join(_problem(p) for p in error.errors()[:5])
            raise StoreCorruptError(
                f"snapshot manifest {where} is refused: {problems}. It is not one splitstate "
                "wrote, so its snapshot is not used. Fix: delete it, and check who may write "
                "to the snapshot store."
            ) from None
        except ValueError as error:
            raise StoreCorruptError(
                f"snapshot manifest {where} cannot be read ({error}). Fix: delete it (the "
                "snapshot is then unused), or use the splitstate version that wrote it."
            ) from None
        return cls(
            app_id=read.app_id,
            processor=read.processor,
            fixed=read.fixed,
            id=read.id,
            created=read.created,
            generation=read.generation,
            offsets={(t, p): o for t, p, o in read.offsets},
            files=tuple(SnapshotFile(f.name, f.path, f.size, f.sha256) for f in read.files),
            request=read.request,
            epoch=read.epoch,
            state_format=read.state_format,
            instance=read.instance,
        )


_SnapshotId = Annotated[str, AfterValidator(check_snapshot_id)]
_Topic = Annotated[str, AfterValidator(check_topic)]


class _FileJson(BaseModel):
    """A file entry as read from the store (strict: only what splitstate writes)."""

    model_config = ConfigDict(strict=True)

    name: Annotated[str, AfterValidator(check_file_name)]
    path: str
    size: NonNegativeInt
    sha256: Annotated[str, AfterValidator(check_sha256)]


class _ManifestJson(BaseModel):
    """A manifest as read from the store (strict: only what splitstate writes)."""

    model_config = ConfigDict(strict=True)

    app_id: str
    processor: NonNegativeInt
    fixed: dict[str, Any]
    id: _SnapshotId
    created: Annotated[float, Field(allow_inf_nan=False)]
    generation: NonNegativeInt
    offsets: list[tuple[_Topic, NonNegativeInt, NonNegativeInt]]
    files: list[_FileJson]
    request: str | None = None
    epoch: str | None = None
    state_format: PositiveInt = 1
    instance: str | None = None

    @model_validator(mode="after")
    def _files_in_place(self) -> _ManifestJson:
        """Each file named once, at the path splitstate keeps it."""
        seen: set[str] = set()
        for index, file in enumerate(self.files):
            if file.name in seen:
                raise ValueError(f"files.{index}.name {file.name!r} is named twice")
            seen.add(file.name)
            try:
                store_path_of(file.path, file.name, self.id)
            except ValueError as error:
                raise ValueError(f"files.{index}.path {file.path!r:.120} {error}") from None
        return self


def _problem(error: Mapping[str, Any]) -> str:
    """One problem of a refused manifest: where, the value (shortened) and what is wrong."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:
        return message
    field = ".".join(str(part) for part in error["loc"])
    if error["type"] == "missing":
        return f"{field} is missing"
    return f"{field} = {error['input']!r:.120}: {message}"


def _json_kind(value: object) -> str:
    """What JSON value ``value`` is, in words."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return "a boolean" if isinstance(value, bool) else "a number"
