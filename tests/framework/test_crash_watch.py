"""The Spark fold's crash guard, without Spark: a group whose worker died folds carefully in a
child process per try, and a record that killed it ``limit`` times is skipped (or, with
``stop``, named); the driver learns from the markers what to do next."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection
from pathlib import Path

import pyarrow as pa
import pytest

from framework.bootstrap.careful_child import Watch
from framework.bootstrap.crash_watch import CrashWatch
from framework.bootstrap.errors import BootstrapError

Position = tuple[str, int, int]
ROWS = 8


class Rows:
    """Row ``r`` is the record at ``t[0]@r`` with key ``k<r>``."""

    def where(self, row: int) -> tuple[str, int, int, bytes | None]:
        return "t", 0, row, f"k{row}".encode()

    def find(self, positions: Collection[Position]) -> dict[Position, int]:
        return {p: p[2] for p in positions if p[0] == "t" and p[1] == 0 and 0 <= p[2] < ROWS}


def folder(
    deaths: Path, killers: set[int], *, between: bool = False
) -> Callable[[frozenset[int], Callable[[int], None] | None], pa.Table]:
    """Sums the rows it runs on; a killer row (or, ``between``, the gap after row 0) logs
    to ``deaths`` and ends the process as a crash would."""

    def fold_rows(skip: frozenset[int], running: Callable[[int], None] | None) -> pa.Table:
        total = 0
        for row in range(ROWS):
            if row in skip:
                continue
            if running is not None:
                running(row)
            if row in killers:
                with deaths.open("a") as log:
                    log.write(f"{row}\n")
                os._exit(9)
            total += row
            if running is not None:
                running(-1)
            if between and row == 0:
                with deaths.open("a") as log:
                    log.write("between\n")
                os._exit(9)
        return pa.table({"total": [total]})

    return fold_rows


def died(deaths: Path) -> list[str]:
    return deaths.read_text().splitlines() if deaths.exists() else []


def suspect(watch: CrashWatch, label: int) -> None:
    """What a worker that died while folding ``label`` normally leaves behind."""
    Path(watch.directory).mkdir(parents=True, exist_ok=True)
    (Path(watch.directory) / f"group-{label}.json").write_text(json.dumps({"state": "folding"}))


def test_a_group_folds_in_the_worker_and_leaves_nothing(tmp_path: Path) -> None:
    watch = CrashWatch(tmp_path / "watch", limit=3, stop=False)
    table, skipped = watch.fold(1, folder(tmp_path / "deaths", set()), Rows())
    assert table.column("total").to_pylist() == [sum(range(ROWS))] and skipped == 0
    assert list((tmp_path / "watch").iterdir()) == []
    assert watch.suspects() == [] and watch.skipped() == []


def test_a_group_whose_worker_died_skips_the_killer_after_limit_deaths(tmp_path: Path) -> None:
    deaths = tmp_path / "deaths"
    watch = CrashWatch(tmp_path / "watch", limit=3, stop=False)
    suspect(watch, 4)
    suspect(watch, 5)
    assert watch.suspects() == [4, 5]
    table, skipped = watch.fold(4, folder(deaths, {2, 6}), Rows())
    assert table.column("total").to_pylist() == [sum(range(ROWS)) - 2 - 6] and skipped == 2
    assert died(deaths) == ["2"] * 3 + ["6"] * 3  # each alone, limit times, as the guard counts
    assert [(s.offset, s.crashes) for s in watch.skipped()] == [(2, 3), (6, 3)]
    assert watch.suspects() == [5]  # 4 is careful now; 5 still waits for its careful run
    again, _ = watch.fold(4, folder(deaths, {2, 6}), Rows())  # a later run of the job
    assert again == table
    assert len(died(deaths)) == 6  # what was skipped once is not run again


def test_with_stop_the_killer_is_named_and_the_job_not_run_again(tmp_path: Path) -> None:
    watch = CrashWatch(tmp_path / "watch", limit=2, stop=True)
    suspect(watch, 0)
    with pytest.raises(BootstrapError, match=r"t\[0\]@5 \(key b'k5'\) killed the Spark fold's"):
        watch.fold(0, folder(tmp_path / "deaths", {5}), Rows())
    stopped = watch.stopped()
    assert stopped is not None and "on_error: dead-letter" in stopped
    assert "exit code 9" in stopped
    assert watch.suspects() == [] and died(tmp_path / "deaths") == ["5", "5"]


def test_deaths_between_records_skip_nothing_and_stop_the_group(tmp_path: Path) -> None:
    watch = CrashWatch(tmp_path / "watch", limit=2, stop=False)
    suspect(watch, 0)
    with pytest.raises(BootstrapError, match="between records"):
        watch.fold(0, folder(tmp_path / "deaths", set(), between=True), Rows())
    assert watch.skipped() == [] and died(tmp_path / "deaths") == ["between", "between"]


def test_an_error_is_no_death_and_the_job_is_not_run_again(tmp_path: Path) -> None:
    watch = CrashWatch(tmp_path / "watch", limit=3, stop=False)

    def failing(skip: frozenset[int], running: Callable[[int], None] | None) -> pa.Table:
        raise ValueError("not a crash")

    with pytest.raises(ValueError, match="not a crash"):
        watch.fold(2, failing, Rows())
    suspect(watch, 3)  # a worker Spark killed meanwhile
    assert watch.suspects() == [] and watch.stopped() is None
    with pytest.raises(BootstrapError, match="ValueError: not a crash"):  # carefully, too
        watch.fold(3, failing, Rows())


TICK = ("t", 0, 100)
ITEM = (0, 11_000, 1, "minute", "")


def ticking_folder(
    deaths: Path,
) -> Callable[[frozenset[int], Watch | None], pa.Table]:
    """Sums the rows it runs on; between rows 2 and 3 a tick fires ``ITEM`` of key ``k2``
    (logged to ``deaths``, ending the process as a crash would) unless the watch refuses
    it, then an item of ``k3`` that never kills."""

    def fold_rows(skip: frozenset[int], running: Watch | None) -> pa.Table:
        total = 0
        for row in range(ROWS):
            if row == 3 and running is not None:
                running.tick(TICK, b"k3", (0, 11_000, 1, "minute", ""))
                if ITEM not in running.refused(TICK, b"k2"):
                    running.tick(TICK, b"k2", ITEM)
                    with deaths.open("a") as log:
                        log.write("tick\n")
                    os._exit(9)
                running(-1)
            if running is not None:
                running(row)
            total += row
            if running is not None:
                running(-1)
        return pa.table({"total": [total]})

    return fold_rows


def test_a_ticks_item_that_kills_is_dropped_after_limit_deaths_and_no_record_is(
    tmp_path: Path,
) -> None:
    """The tick's item of ``k2`` kills the careful child each time: after ``limit`` deaths
    it is dropped (the fold goes on without running it), named with its key and item; no
    record is skipped, and a later run drops it at once."""
    deaths = tmp_path / "deaths"
    watch = CrashWatch(tmp_path / "watch", limit=3, stop=False)
    suspect(watch, 1)
    table, skipped = watch.fold(1, ticking_folder(deaths), Rows())
    assert table.column("total").to_pylist() == [sum(range(ROWS))] and skipped == 0
    assert died(deaths) == ["tick"] * 3
    [dropped] = watch.skipped()
    assert (dropped.offset, dropped.crashes, dropped.key, dropped.item) == (100, 3, b"k2", ITEM)
    assert "dropped key b'k2''s window of store 'minute' closing at 11000 ms" in dropped.describe()
    again, _ = watch.fold(1, ticking_folder(deaths), Rows())  # a later run of the job
    assert again == table and len(died(deaths)) == 3


def test_with_stop_a_ticks_killing_item_is_named_and_stops_the_group(tmp_path: Path) -> None:
    watch = CrashWatch(tmp_path / "watch", limit=2, stop=True)
    suspect(watch, 0)
    with pytest.raises(BootstrapError, match=r"the tick at t\[0\]@100 killed .* key b'k2'"):
        watch.fold(0, ticking_folder(tmp_path / "deaths"), Rows())
    assert died(tmp_path / "deaths") == ["tick", "tick"]
