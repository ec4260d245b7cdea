"""Reading a processor's state while the processor writes it (what ``status`` and the tools do).

A processor's RocksDB flushes and compacts as it runs, deleting files a reader that opened
the database a moment before still expects. Reads must neither fail nor give up (``status``
must never show a raw RocksDB error, or silently less, because a processor is busy).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from framework.coordination.progress_reports import ProcessorReport
from framework.ops.processor_facts import ProcessorFacts
from statestore import ProcessorDatabase
from tests.sim.app import make_app
from tests.statestore.conftest import IDENTITY, STORES

#: a processor at work: batches of writes, and a snapshot (a checkpoint: it flushes the
#: memtable into a new SST file, and compactions follow) every 20 batches
BUSY = """
import shutil, sys
from pathlib import Path
from statestore import ProcessorDatabase
from tests.statestore.conftest import IDENTITY, STORES
path, snapshots = Path(sys.argv[1]), Path(sys.argv[2])
with ProcessorDatabase.open(path, IDENTITY, STORES) as database:
    i = 0
    while True:
        batch = database.begin()
        store = batch.store("counts")
        for k in range(200):
            store.set(f"k{(i * 200 + k) % 5000}".encode(), i)
        batch.set_offset("in", 0, i + 1)
        batch.commit()
        if i == 0:
            print("open", flush=True)  # (after the first batch: every read finds an offset)
        i += 1
        if i % 20 == 0:
            shutil.rmtree(database.snapshot(snapshots / f"s{i}"))
"""

SECONDS = 8.0


def test_reads_while_the_processor_flushes_and_compacts_never_fail(tmp_path: Path) -> None:
    app = make_app(
        tmp_path / "state",
        partitions=2,
        initial_processors=1,
        max_records=1,
        lease_ms=1000,
        ready_lag=0,
    )
    path = app.config.app_state_dir / "processor-0"
    with ProcessorDatabase.open(path, IDENTITY, STORES) as database:
        batch = database.begin()
        batch.record_skip("in", 1, 9, b'{"crashes": 3, "at": 1.5}')
        batch.commit()
    writer = subprocess.Popen(
        [sys.executable, "-c", BUSY, str(path), str(tmp_path / "snapshots")],
        stdout=subprocess.PIPE,
        text=True,
    )
    report = ProcessorReport(0, "elsewhere", 1, time.time(), skipped=[])  # says less than here
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "open"
        failures: list[str] = []
        reads = 0
        end = time.monotonic() + SECONDS
        while time.monotonic() < end:
            reads += 1
            try:
                with ProcessorDatabase.open_read_only(path) as reader:
                    assert reader.offsets()[("in", 0)] > 0
                    assert sum(1 for _ in reader.backend.scan("counts")) > 0
            except Exception as error:  # every failure is what is counted
                failures.append(f"{type(error).__name__}: {error}")
            facts = ProcessorFacts(app, {0: report}, time.time())
            if [(s.offset, s.crashes) for s in facts.skipped(0)] != [(9, 3)]:
                failures.append("status read no skipped record from the busy state")
        assert writer.poll() is None, "the writer stopped early"
    finally:
        writer.kill()
        writer.wait()
    assert reads > 50
    assert not failures, f"{len(failures)} of {reads} reads failed, e.g. {failures[:3]}"
