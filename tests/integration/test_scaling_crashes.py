"""Crash safety of the catch-up protocol at exact steps (SPLITSTATE_FAULT kills a processor
once, right before or after it writes a handoff event). Scale 2 -> 3 under continuous
production; every word's counts are exactly 1..n afterwards (outputs may repeat, state not)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.integration.harness import (
    Supervised,
    TopicReader,
    counts_by_word,
    splitstate,
    unique,
    write_config,
)
from tests.integration.test_scaling import APP, Production, scale_to, wait_for_generation

pytestmark = pytest.mark.integration

FAULTS = {
    "joiner dies while catching up": "2:after:START_CATCH_UP",
    "joiner dies right after READY": "2:after:CAUGHT_UP",
    "old owner dies after READY, before RELEASE is written": "0:before:RELEASE",
    "old owner dies right after RELEASE": "0:after:RELEASE",
    "joiner dies between RELEASED and ACTIVE": "2:before:COMPLETE",
}


@pytest.mark.parametrize("fault", list(FAULTS.values()), ids=list(FAULTS))
def test_crash_at_each_step(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    monkeypatch.setenv("SPLITSTATE_FAULT", fault)
    words, counts = unique("words"), unique("word-counts")
    config = write_config(
        tmp_path,
        kafka_bootstrap,
        app_id=unique("crash"),
        inputs=[{"topic": words, "partitions": 8}],
        outputs=[{"topic": counts, "partitions": 8}],
        initial_processors=2,
        processors=2,
        scaling={"ready_lag": 200},
    )
    assert splitstate("topics", "create", APP, "--config", str(config)).returncode == 0
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    production = Production(kafka_bootstrap, words)
    reader = TopicReader(kafka_bootstrap, counts, 8)
    try:
        deadline = time.monotonic() + 60
        while len(runner.pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        production.start()
        reader.wait_for(lambda r: len(r.records) > 2000, timeout=120, what="outputs to flow")
        wait_for_generation(config, scale_to(config, 3))
        time.sleep(1)
        production.stop_event.set()
        production.join()
        truth = production.written

        def complete(r: TopicReader) -> bool:
            seen = counts_by_word(r.records)
            return all(max(seen.get(w, [0])) >= n for w, n in truth.items())

        reader.wait_for(complete, timeout=180, what="every word's final count")
        reader.poll(2.0)
    finally:
        production.stop_event.set()
        status = runner.stop()
        reader.close()
    log = runner.output()
    assert status == 0, log[-3000:]
    victim = fault.split(":", maxsplit=1)[0]
    assert f"processor {victim} exited with status -9; restarting" in log, log[-3000:]
    seen = counts_by_word(reader.records)
    for word, n in truth.items():
        assert set(seen[word]) == set(range(1, n + 1)), (word, n, sorted(seen[word])[:5])
    assert os.path.exists(
        tmp_path / "state" / f".fault-{victim}-{fault.split(':', 1)[1].replace(':', '-')}"
    )
