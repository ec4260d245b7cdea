"""wordcount on the real broker: exact counts, also across a SIGKILL and supervisor restart."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.harness import (
    Supervised,
    TopicReader,
    counts_by_word,
    produce,
    splitstate,
    unique,
    write_config,
)

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"
ROOT = Path(__file__).resolve().parents[2]


def wordcount_config(
    tmp_path: Path, bootstrap: str, partitions: int, processors: int
) -> tuple[Path, str, str]:
    words, counts = unique("words"), unique("word-counts")
    config = write_config(
        tmp_path,
        bootstrap,
        app_id=unique("wordcount"),
        inputs=[{"topic": words, "partitions": partitions}],
        outputs=[{"topic": counts, "partitions": partitions}],
        initial_processors=processors,
        processors=processors,
    )
    created = splitstate("topics", "create", APP, "--config", str(config))
    assert created.returncode == 0, created.stderr
    return config, words, counts


def make_words(records: int, keys: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [f"word-{rng.randrange(keys):05d}".encode() for _ in range(records)]


def test_three_processors_count_exactly(tmp_path: Path, kafka_bootstrap: str) -> None:
    config, words, counts = wordcount_config(tmp_path, kafka_bootstrap, 6, 3)
    stream = make_words(50_000, 2_000, seed=1)
    truth = Counter(w.decode() for w in stream)
    produce(kafka_bootstrap, words, ((w, b"") for w in stream))

    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    reader = TopicReader(kafka_bootstrap, counts, 6)
    try:
        reader.wait_for(lambda r: len(r.records) >= len(stream), timeout=240, what="50,000 outputs")
        reader.poll(2.0)
    finally:
        status = runner.stop()
        reader.close()
    assert status == 0, runner.output()[-3000:]
    seen = counts_by_word(reader.records)
    assert len(reader.records) == len(stream)  # no restarts: one output per record
    assert {word: values[-1] for word, values in seen.items()} == truth
    assert all(values == list(range(1, len(values) + 1)) for values in seen.values())
    log = runner.output()
    assert "processor 0 of" in log and "processor 2 of" in log


def test_sigkill_mid_stream_keeps_counts_exact(tmp_path: Path, kafka_bootstrap: str) -> None:
    config, words, counts = wordcount_config(tmp_path, kafka_bootstrap, 6, 3)
    stream = make_words(50_000, 2_000, seed=2)
    truth = Counter(w.decode() for w in stream)

    def keep_producing() -> None:
        for start in range(0, len(stream), 2_500):
            produce(kafka_bootstrap, words, ((w, b"") for w in stream[start : start + 2_500]))
            time.sleep(0.25)

    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    producer = threading.Thread(target=keep_producing)
    reader = TopicReader(kafka_bootstrap, counts, 6)
    try:
        deadline = time.monotonic() + 60
        while len(runner.pids()) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        producer.start()
        reader.wait_for(lambda r: len(r.records) > 8_000, timeout=120, what="outputs to flow")
        victim = runner.pids()[1]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while runner.pids().get(1) in (None, victim) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert runner.pids().get(1) not in (None, victim), "processor 1 was not restarted"
        producer.join()

        def complete(r: TopicReader) -> bool:
            seen = counts_by_word(r.records)
            return all(max(seen.get(w, [0])) >= n for w, n in truth.items())

        reader.wait_for(complete, timeout=240, what="every word's final count")
        reader.poll(2.0)
    finally:
        status = runner.stop()
        reader.close()
    assert status == 0, runner.output()[-3000:]
    seen = counts_by_word(reader.records)
    # Outputs may repeat after the kill, state may not: every word's counts are exactly 1..n.
    for word, n in truth.items():
        assert set(seen[word]) == set(range(1, n + 1)), (word, n, seen[word])
    assert "processor 1 exited with status -9; restarting" in runner.output()


def test_python_app_py_runs_every_processor_from_another_directory(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """``python app.py --all`` (the example ends with ``app.run()``), run from a directory
    that is not the project's: the supervisor's processors load the file by its path."""
    config, words, counts = wordcount_config(tmp_path, kafka_bootstrap, 4, 2)
    stream = make_words(2_000, 50, seed=3)
    produce(kafka_bootstrap, words, ((w, b"") for w in stream))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with (tmp_path / "run.log").open("wb") as log:
        script = [sys.executable, str(ROOT / "examples" / "wordcount" / "app.py")]
        process = subprocess.Popen(
            [*script, "--all", "--config", str(config)],
            cwd=elsewhere,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        reader = TopicReader(kafka_bootstrap, counts, 4)
        try:
            reader.wait_for(lambda r: len(r.records) >= len(stream), timeout=180, what="outputs")
        finally:
            process.send_signal(signal.SIGTERM)
            status = process.wait(timeout=90)
            reader.close()
    output = (tmp_path / "run.log").read_text(errors="replace")
    assert status == 0, output[-3000:]
    seen = counts_by_word(reader.records)
    assert {word: values[-1] for word, values in seen.items()} == Counter(
        w.decode() for w in stream
    )
    assert "processor 0 of" in output and "processor 1 of" in output, output[-3000:]
