"""Bootstrap output: manifests, archive column checks, and ingesting into a catch-up scope."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.bootstrap import (
    ArchiveError,
    Manifest,
    ManifestError,
    TargetState,
    check_archive_columns,
)
from statestore import ProcessorDatabase, SstRunWriter
from tests.statestore.conftest import IDENTITY, STORES

GOOD = {
    "key": "binary",
    "value": "binary",
    "partition": "int",
    "offset": "bigint",
    "timestamp": "timestamp",
    "headers": "array<struct<key:string,value:binary>>",
}


def test_manifest_round_trip_and_absolute_files(tmp_path: Path) -> None:
    manifest = Manifest(
        targets={
            2: TargetState({"counts": ["processor-2/counts/part-00000-000.sst"]}, 5, {("w", 3): 17})
        },
        records_read=40,
        records_applied=12,
    )
    manifest.write(tmp_path)
    read = Manifest.read(tmp_path)
    assert read == manifest
    assert read.files(2) == {"counts": [tmp_path / "processor-2/counts/part-00000-000.sst"]}


def test_unfinished_or_damaged_manifest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="did not finish"):
        Manifest.read(tmp_path)
    (tmp_path / "manifest.json").write_text('{"format": 1, "targets": {"0": {}}}')
    with pytest.raises(ManifestError, match="is damaged"):
        Manifest.read(tmp_path)


def test_archive_columns_are_checked_by_name_and_type() -> None:
    check_archive_columns(GOOD, Path("/lake/words"), ["words"])
    without_headers = {k: v for k, v in GOOD.items() if k != "headers"}
    check_archive_columns(without_headers, Path("/lake/words"), ["words"])
    broken = {**without_headers, "offset": "string"}
    del broken["key"]
    with pytest.raises(ArchiveError) as error:
        check_archive_columns(broken, Path("/lake/words"), ["words", "clicks"])
    text = str(error.value)
    assert "column 'key' is missing" in text
    assert "column 'offset' is string, expected bigint or int" in text
    assert "column 'topic' is missing" in text
    assert "/lake/words" in text


def test_bulk_load_into_a_scope_sets_progress_not_input_offsets(tmp_path: Path) -> None:
    with ProcessorDatabase.open(tmp_path / "processor-0", IDENTITY, STORES) as database:
        layout = database.layout
        files = SstRunWriter(tmp_path / "sst", layout=layout).write(
            layout.sorted_items([(b"a", 1), (b"b", 2)])
        )
        database.bulk_load({"counts": files}, {("w", 1): 9}, scope="catchup-3")
        assert database.offsets() == {}
        assert database.progress("catchup-3") == {("w", 1): 9}
        assert database.get("counts", b"b") == 2
