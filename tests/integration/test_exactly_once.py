"""Exactly-once outputs on the real broker: a ``read_committed`` reader of wordcount's outputs
sees every word's counts exactly 1..n, with no repeat at all, although processors are killed
between their transaction's commit and their state's, during a live scale."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import (
    Supervised,
    TopicReader,
    WordWriter,
    counts_by_word,
    create_app,
    produce,
    splitstate,
    unique,
    wait_for,
    write_config,
)
from tests.integration.test_scaling import APP, ScalingRun, scale_to, wait_for_generation
from tests.integration.test_snapshots import committed

pytestmark = pytest.mark.integration


def test_no_output_repeats_when_processors_die_between_transaction_and_state(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each dies once right after a batch's transaction committed, before its RocksDB write:
    # the group is then ahead of the state, and the restart rebuilds that gap without output
    faults = "0:batch:transaction-committed,1:batch:transaction-committed"
    monkeypatch.setenv("SPLITSTATE_FAULT", faults)
    run = ScalingRun(tmp_path, kafka_bootstrap, processing_guarantee="exactly-once")
    try:
        run.start_flowing()
        wait_for_generation(run.config, scale_to(run.config, 3))
        time.sleep(1)
        truth = run.finish()
        status_text = splitstate("status", APP, "--config", str(run.config)).stdout
    finally:
        status, log = run.stop()
    assert status == 0, log[-3000:]
    for victim in (0, 1):
        assert f"processor {victim} exited with status -9; restarting" in log, log[-3000:]
    assert "outputs exactly-once" in status_text, status_text
    seen = counts_by_word(run.reader.records)
    assert set(seen) == set(truth)
    for word, n in truth.items():
        assert sorted(seen[word]) == list(range(1, n + 1)), (word, n, sorted(seen[word])[:8])


def _start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "framework.ops.cli", "run", APP, "--processor-id", "0"]
    with log.open("wb") as out:
        return subprocess.Popen([*command, "--config", str(config)], stdout=out, stderr=out)


def test_a_second_instance_of_a_processor_fences_the_first(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """Processor 0 started twice by mistake, as on two machines (two state directories): the
    newer one fences the older, which stops saying so; no output is written twice."""
    words, counts, app_id = unique("words"), unique("counts"), unique("fenced")
    fields: dict[str, Any] = {
        "app_id": app_id,
        "inputs": [{"topic": words, "partitions": 2}],
        "outputs": [{"topic": counts, "partitions": 2}],
        "initial_processors": 1,
        "processing_guarantee": "exactly-once",
    }
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = create_app(tmp_path / "a", kafka_bootstrap, APP, **fields)
    second = write_config(tmp_path / "b", kafka_bootstrap, **fields)
    writer = WordWriter(kafka_bootstrap, words, 40)
    write, truth = writer.write, writer.truth

    def processed() -> int:
        return sum(committed(kafka_bootstrap, app_id, words, 2).values())

    write(2000, 0)
    older = _start(first, tmp_path / "a.log")
    newer: subprocess.Popen[bytes] | None = None
    try:
        wait_for(lambda: processed() == 2000, 120, "2000 records processed by the first")
        newer = _start(second, tmp_path / "b.log")
        wait_for(
            lambda: f"of {app_id}: partitions" in (tmp_path / "b.log").read_text(),
            120,
            "the newer instance to run",
        )
        write(2000, 2000)  # the older one's next transaction finds it was fenced
        wait_for(lambda: older.poll() is not None, 120, "the older instance to stop")
        wait_for(lambda: processed() == 4000, 120, "4000 records processed")
    finally:
        for process in (older, newer):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(60)
    older_log = (tmp_path / "a.log").read_text()
    assert older.returncode == 4, older_log[-3000:]
    # it stops as it reads the newer run's instance record, or at its next transaction
    stopped = ("was replaced: a newer run of it", "was fenced: another instance of processor 0")
    assert any(why in older_log for why in stopped), older_log[-3000:]
    reader = TopicReader(kafka_bootstrap, counts, 2)
    try:
        reader.poll(3.0)
        seen = counts_by_word(reader.records)
    finally:
        reader.close()
    assert sum(len(v) for v in seen.values()) == 4000  # none repeated, none missing
    for word, n in truth.items():
        assert sorted(seen[word]) == list(range(1, n + 1)), (word, n)


BALANCES = "examples.balances.app:app"


def test_balances_under_exactly_once_through_kills_and_a_scale(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deposits to 60 accounts while processors die right after a transaction committed and
    the app scales 2 -> 3: each account's balances read ``read_committed`` count its
    transactions exactly 1..n, the last one its sum; the state holds the same."""
    monkeypatch.setenv(
        "SPLITSTATE_FAULT", "0:batch:transaction-committed,1:batch:transaction-committed"
    )
    transactions, balances = unique("transactions"), unique("balances")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        BALANCES,
        app_id=unique("balances"),
        inputs=[{"topic": transactions, "partitions": 8}],
        outputs=[{"topic": balances, "partitions": 4}],
        initial_processors=2,
        processors=2,
        processing_guarantee="exactly-once",
        scaling={"ready_lag": 200},
    )
    rng = random.Random(16)
    sums: Counter[str] = Counter()
    counts: Counter[str] = Counter()

    def deposit(records: int) -> None:
        batch = []
        for _ in range(records):
            account, amount = f"acc-{rng.randrange(60):02d}", rng.randint(1, 500)
            body = {"account": account, "kind": "deposit", "amount": amount}
            batch.append((account.encode(), json.dumps(body).encode()))
            sums[account] += amount
            counts[account] += 1
        produce(kafka_bootstrap, transactions, batch)

    runner = Supervised(BALANCES, config, tmp_path / "state", tmp_path / "run.log")
    reader = TopicReader(kafka_bootstrap, balances, 4)
    try:
        deposit(3000)
        reader.wait_for(lambda r: len(r.records) >= 1000, 120, "balances")
        generation = scale_to(config, 3, BALANCES)
        for _ in range(6):
            deposit(500)
            time.sleep(0.5)
        wait_for_generation(config, generation, app_name=BALANCES)
        total = sum(counts.values())
        reader.wait_for(lambda r: len(r.records) >= total, 180, f"{total} balances")
        reader.poll(2.0)
    finally:
        status = runner.stop()
        reader.close()
    log = runner.output()
    assert status == 0, log[-3000:]
    for victim in (0, 1):
        assert f"processor {victim} exited with status -9; restarting" in log, log[-3000:]
    seen: dict[str, list[dict[str, Any]]] = {}
    for key, value, _headers in reader.records:
        assert key is not None and value is not None
        seen.setdefault(key.decode(), []).append(json.loads(value))
    assert len(reader.records) == sum(counts.values())  # nothing repeated, nothing missing
    for account, n in counts.items():
        assert [b["transactions"] for b in seen[account]] == list(range(1, n + 1)), account
        assert seen[account][-1]["balance"] == sums[account], account
