"""A snapshot of a processor that orders its inputs canonically carries each partition's mark
with the offsets (the progress scope ``ORDER_SCOPE`` is in the database it copies): restored,
and the records past its offsets read again, it commits what the live processor commits."""

from __future__ import annotations

import shutil
from pathlib import Path

from framework.input_times import ORDER_SCOPE
from framework.snapshots.restore import restore_lost_state
from framework.snapshots.taker import SnapshotTaker
from framework.testing import TestDriver
from rebalance.control import ControlState
from statestore import DatabaseIdentity, ProcessorDatabase
from statestore.snapshot_store import SnapshotStore
from tests.clocks import ManualClock
from tests.framework.order.appending_app import appending_app, config
from tests.framework.order.appending_world import drawn, ends_of, go_on, held_after, send
from tests.framework.snapshot_world import take


def test_a_restored_snapshot_goes_on_as_the_live_processor(tmp_path: Path) -> None:
    settings = config().model_copy(update={"state_dir": tmp_path / "state"})
    app = appending_app()
    app.configure(settings)
    identity = DatabaseIdentity(settings.app_id, 0)
    path = settings.app_state_dir / "processor-0"
    sent, cut = drawn(seed=11, count=120), 60
    database = ProcessorDatabase.open(path, identity, app.store_specs())
    live = send(TestDriver(app, database=database), sent[:cut])
    ends, marks = database.offsets(), database.progress(ORDER_SCOPE)
    owned = set(ends_of([]))
    store = SnapshotStore(settings.snapshot_url, settings.app_id)
    take(
        SnapshotTaker(settings, 0, database, store, ManualClock(5.0), instance="run"),
        owned,
        ControlState(),
    )
    steps = go_on(live, sent[cut:])  # the live processor goes on
    database.close()
    shutil.rmtree(path)  # (lost)
    restored = restore_lost_state(settings, identity, path, owned, None)
    assert restored is not None
    back = ProcessorDatabase.open(path, identity, app.store_specs())
    try:
        assert back.offsets() == ends
        assert back.progress(ORDER_SCOPE) == marks  # the marks came with it
        resumed = send(TestDriver(appending_app(), database=back), held_after(sent[:cut], ends))
        assert go_on(resumed, sent[cut:]) == steps
    finally:
        back.close()
