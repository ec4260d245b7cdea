"""`splitstate state offsets` after a scale: a processor's state keeps the offsets of the
partitions it gave away (found by a new user, who read them as partitions it still owned).
With the app (``--app``, or ``--snapshot``) each line says whether the processor owns that
partition; without it, a note on stderr says what the list holds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from framework.coordination.scaling import read_control
from framework.loader import load_app
from tests.integration.harness import (
    Supervised,
    create_app,
    produce,
    splitstate,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"


def lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_offsets_of_partitions_given_away_are_marked(tmp_path: Path, kafka_bootstrap: str) -> None:
    words = unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("offsets"),
        inputs=[{"topic": words, "partitions": 4}],
        outputs=[{"topic": unique("counts"), "partitions": 4}],
        initial_processors=1,
        snapshots={"interval_seconds": 2},
    )
    produce(kafka_bootstrap, words, ((f"w{i % 40}".encode(), b"") for i in range(400)))
    runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
    app = load_app(APP, config)
    try:
        wait_for(lambda: "processor 0 of" in runner.output(), 60, "processor 0 to start")
        scaled = splitstate("scale", APP, "--config", str(config), "--processors", "2")
        assert scaled.returncode == 0, scaled.stderr
        wait_for(lambda: (read_control(app).processors or 0) == 2, 120, "generation 1")
        wait_for(lambda: "moved-1-0-1 done" in runner.output(), 60, "the moved keys' purge")
        # processor 0's, of its partitions only: one whose checkpoint predates the purge
        # (uploaded after it) still covers all four; the receiver's say the same of theirs
        taken = re.compile(r"processor 0: snapshot \S+ in .* generation 1, offsets \{(.*)\}\)")
        wait_for(
            lambda: any(
                f"'{words}', 1)" not in covered
                for covered in taken.findall(runner.output().split("moved-1-0-1 done")[-1])
            ),
            60,
            "a snapshot of processor 0's partitions in generation 1",
        )
    finally:
        assert runner.stop() == 0, runner.output()[-2000:]
    given_away = {(words, 1), (words, 3)}  # 1 -> 2 processors: partitions 1 and 3 move

    state = str(tmp_path / "state")
    bare = splitstate("state", "offsets", "--dir", state, "--processor", "0")
    assert bare.returncode == 0, bare.stderr
    assert {(r["topic"], r["partition"]) for r in lines(bare.stdout)} >= given_away
    assert "gave away" in bare.stderr and "--app" in bare.stderr, bare.stderr

    args = ["--app", APP, "--config", str(config), "--processor", "0"]
    marked = splitstate("state", "offsets", "--dir", state, *args)
    assert marked.returncode == 0, marked.stderr
    found = {(r["topic"], r["partition"]): r["owned"] for r in lines(marked.stdout)}
    assert found == {(words, p): (words, p) not in given_away for p in range(4)}, found

    snapshot = splitstate(
        "state", "offsets", "--snapshot", APP, "--config", str(config), "--processor", "0"
    )
    assert snapshot.returncode == 0, snapshot.stderr
    found = {(r["topic"], r["partition"]): r["owned"] for r in lines(snapshot.stdout)}
    assert [p for p, owned in found.items() if owned] == [(words, 0), (words, 2)], found
