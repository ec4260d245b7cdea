"""A processor's state on disk is owner-only, whatever the umask (real files, their ``stat``
modes): the app's state directory, snapshot staging and a local store, a snapshot transfer's
work directory while it copies and filters, a directory restored after a lost disk, a Spark
bootstrap's directory; and a run tightens an app state directory an older splitstate left
open to other users, saying so."""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.bootstrap import Manifest, TargetState
from framework.bootstrap.child_process import BootstrapRun, bootstrap_directory
from framework.runtime.loop import ProcessorRuntime
from framework.snapshots.restore import restore_lost_state
from framework.snapshots.taker import SnapshotTaker
from framework.snapshots.transfer_progress import transfer_directory
from rebalance.positions import OffsetRange
from statestore.snapshot_store import SnapshotStore
from tests.clocks import ManualClock
from tests.framework.snapshot_world import (
    TOPIC,
    config_for,
    fill,
    joining_transfer,
    open_processor,
    scale_state,
    take,
)
from tests.framework.test_bootstrap_run import make_app as bootstrap_app
from tests.sim.one_key import one_key_world


@pytest.fixture(autouse=True)
def _usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def open_to_others(path: Path) -> None:
    os.chmod(path, 0o755)  # noqa: S103 - as an older splitstate, or the umask, left it


def directory_modes(root: Path) -> dict[str, int]:
    """Each directory under ``root`` (``root`` too) whose mode lets other users in."""
    entries = [root, *root.rglob("*")]
    return {str(p): mode(p) for p in entries if p.is_dir() and mode(p) != 0o700}


def test_snapshots_a_transfer_and_a_restore_keep_the_state_owner_only(tmp_path: Path) -> None:
    open_to_others(tmp_path)
    config = config_for(tmp_path)
    state = config.app_state_dir
    clock = ManualClock(100.0)
    store = SnapshotStore(config.snapshot_url, config.app_id)
    source = open_processor(config, 0)
    fill(source, 0, {0: 500, 2: 700})
    taker = SnapshotTaker(config, 0, source, store, clock, instance="run")
    taker.request()
    take(taker, {(TOPIC, 0), (TOPIC, 2)}, scale_state())
    receiver = open_processor(config, 2)
    work = transfer_directory(state, 2, 1)
    transfer = joining_transfer(receiver, store, work, clock, 1 << 12)
    seen_filtering = False
    for _ in range(10_000):
        clock.now += 1
        if transfer.poll() is not None:
            break
        assert directory_modes(state) == {}, "a directory of the transfer is open to others"
        seen_filtering |= any(work.rglob("*.sst"))
    assert seen_filtering  # its downloaded snapshot and kept keys were there to check
    receiver.close()
    # a processor that lost its disk comes back owner-only
    path = source.path
    assert path is not None
    source.close()
    shutil.rmtree(path)
    restored = restore_lost_state(config, source.identity, path, {(TOPIC, 0), (TOPIC, 2)}, None)
    assert restored is not None
    assert directory_modes(state) == {}
    assert mode(path) == 0o700 and (path / "CURRENT").exists()
    store_root = Path(config.snapshot_url)
    assert directory_modes(store_root) == {}
    assert {mode(p) for p in store_root.rglob("*") if p.is_file()} == {0o600}


def test_a_run_makes_the_app_state_directory_owner_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kafka, app = one_key_world(tmp_path / "app", records=3, seed=1, exactly_once=False)
    state = app.config.app_state_dir
    state.mkdir(parents=True)
    open_to_others(state)  # as an older splitstate made it
    with caplog.at_level(logging.WARNING, logger="statestore.owner_only"):
        ProcessorRuntime(app, 0, kafka=kafka).run(until=lambda s: s.records >= 3)
    assert directory_modes(state) == {}
    assert f"{state} was open to other users (mode 0755" in caplog.text


def test_a_spark_bootstraps_directory_is_owner_only(tmp_path: Path) -> None:
    open_to_others(tmp_path)
    app = bootstrap_app(tmp_path)
    output = bootstrap_directory(app, 2, 1) / "output"
    output.mkdir(parents=True)  # finished before a restart (made by an older splitstate)
    Manifest({2: TargetState({}, 0, {("words", 2): 10})}).write(output)
    run = BootstrapRun.start(
        app,
        processor=2,
        generation=1,
        processors=3,
        gained_from=(2, [0]),
        ranges={("words", 2): OffsetRange(0, 10)},
        covers=[("words", 2)],
    )
    assert mode(run.directory) == 0o700
