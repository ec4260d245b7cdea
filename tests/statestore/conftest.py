"""Store tests run over both backends: RocksDB on disk and the in-memory one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec

IDENTITY = DatabaseIdentity("test-app", 0, {"initial_processors": 2, "topics": {"in": 8}})


class Account(BaseModel):
    """A typed state value."""

    owner: str
    balance: int = 0


STORES = [StoreSpec("counts"), StoreSpec("accounts", Account)]


def open_database(kind: str, directory: Path) -> ProcessorDatabase:
    if kind == "rocksdb":
        return ProcessorDatabase.open(directory / "processor-0", IDENTITY, STORES)
    return ProcessorDatabase.in_memory(IDENTITY, STORES)


@pytest.fixture(params=["rocksdb", "memory"])
def backend_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProcessorDatabase]:
    """A fresh database of the backend named by indirect parametrization."""
    kind: str = getattr(request, "param", "rocksdb")
    db = open_database(kind, tmp_path)
    yield db
    db.close()
