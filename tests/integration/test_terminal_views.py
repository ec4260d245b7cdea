"""Live terminal views against a real broker: `status --watch` in a real terminal (tmux) and
through a pipe, and the fence countdown of `expand` in both."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.harness import (
    Supervised,
    create_app,
    produce,
    splitstate,
    unique,
)
from tests.integration.tmux import TmuxPane, require_tmux

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"
ROOT = Path(__file__).resolve().parents[2]
ESC = "\x1b"


def cli(*args: str) -> list[str]:
    """The `splitstate` command line, runnable from a tmux pane."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return ["env", f"PYTHONPATH={path}", sys.executable, "-m", "framework.ops.cli", *args]


def plain_environment() -> dict[str, str]:
    """The environment with nothing that forces rich to draw on a pipe."""
    return {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}


def ends(kafka: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": unique("ends")})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def rows(screen: str) -> list[list[str]]:
    return [line.split() for line in screen.splitlines()]


def processor_row(screen: str, processor: int) -> list[str] | None:
    """The processors table's row of ``processor``: id, host, pid, share, state, lag,
    partitions."""
    for row in rows(screen):
        if len(row) > 6 and row[0] == str(processor) and row[3].endswith("%"):
            return row
    return None


def pid_of(row: list[str] | None) -> str | None:
    return None if row is None else row[2]


def lag_of(row: list[str] | None) -> int | None:
    """The lag in a processors-table row (the state size may be `-` or `4 KiB`)."""
    if row is None:
        return None
    lag = row[6] if row[4] != "-" else row[5]
    return int(lag.replace(",", ""))


def test_status_watch_in_a_terminal_and_through_a_pipe(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    require_tmux()
    words = unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("watch"),
        inputs=[{"topic": words, "partitions": 4}],
        outputs=[{"topic": unique("counts"), "partitions": 4}],
        initial_processors=2,
    )
    produce(kafka_bootstrap, words, ((f"w{i % 50}".encode(), b"") for i in range(400)))
    end = ends(kafka_bootstrap, words, 4)
    expected = {j: sum(end[p] for p in range(4) if p % 2 == j) for j in range(2)}
    assert sum(expected.values()) == 400

    pane = TmuxPane(
        cli("status", APP, "--config", str(config), "--watch", "--interval", "1"), tmp_path
    )
    runner: Supervised | None = None
    try:
        # nothing runs yet: all 400 records are lag, and no processor has a pid
        screen = pane.wait_for(
            lambda s: all(lag_of(processor_row(s, j)) == expected[j] for j in range(2)),
            60,
            "the processors table with the whole input as lag",
        )
        assert "Ctrl-C to exit" in screen
        assert all(pid_of(processor_row(screen, j)) == "-" for j in range(2))
        for p in range(4):
            assert [f"{words}[{p}]", str(p % 2), "-", str(end[p]), str(end[p])] in rows(screen)

        # the processors start and catch up: the same view refreshes to pids and no lag
        runner = Supervised(APP, config, tmp_path / "state", tmp_path / "run.log")
        screen = pane.wait_for(
            lambda s: all(
                lag_of(processor_row(s, j)) == 0 and pid_of(processor_row(s, j)) not in (None, "-")
                for j in range(2)
            ),
            120,
            "the view to show both processors running with no lag",
        )
        for p in range(4):
            assert [f"{words}[{p}]", str(p % 2), str(end[p]), str(end[p]), "0"] in rows(screen)
        assert pane.exit_status() is None  # still watching

        pane.press("C-c")
        assert pane.wait_exit(30) == 0

        # through a pipe: a plain report per refresh, blank line between, no escapes
        watch = subprocess.Popen(
            cli("status", APP, "--config", str(config), "--watch", "--interval", "0.5"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=plain_environment(),
        )
        seen: list[str] = []
        headers = 0
        assert watch.stdout is not None
        while headers < 2:
            line = watch.stdout.readline()
            assert line, f"the watch ended early: {''.join(seen)}"
            seen.append(line)
            headers += line.startswith("app ")
        watch.send_signal(signal.SIGINT)
        rest = watch.stdout.read()  # (communicate() would skip what readline() buffered)
        assert watch.stderr is not None
        errors = watch.stderr.read()
        assert watch.wait(timeout=60) == 0, errors
        text = "".join(seen) + rest
        assert ESC not in text
        reports = [r for r in text.split("\n\napp ") if r.strip()]
        assert len(reports) >= 2
        assert f"{words}[0]" in reports[1] and "processor" in reports[1]
        assert "\n\n" in text

        # `snapshot take` waits for every processor's answer: plain lines through a pipe
        taken = subprocess.run(
            cli("snapshot", "take", APP, "--config", str(config), "--timeout", "120"),
            capture_output=True,
            text=True,
            timeout=180,
            env=plain_environment(),
            check=False,
        )
        assert taken.returncode == 0, taken.stderr
        assert "snapshot take: 2 of 2 processors answered" in taken.stderr
        assert ESC not in taken.stdout + taken.stderr
        dumped = subprocess.run(
            cli("state", "dump", "--snapshot", APP, "--config", str(config), "--processor", "0"),
            capture_output=True,
            text=True,
            timeout=120,
            env=plain_environment(),
            check=False,
        )
        assert dumped.returncode == 0, dumped.stderr
        assert all(json.loads(line) for line in dumped.stdout.splitlines())  # stdout: the dump
        assert re.search(r"snapshot download \S+: [\d.,]+ of [\d.,]+ (?:B|KiB|MiB)", dumped.stderr)
        assert ESC not in dumped.stdout + dumped.stderr
        assert runner.stop() == 0, runner.output()[-3000:]
        runner = None

        # a scale the processors (stopped) have not started: its handoff shows, at 0%
        scaled = splitstate("scale", APP, "--config", str(config), "--processors", "3")
        assert scaled.returncode == 0, scaled.stderr
        pane.close()
        pane = TmuxPane(cli("status", APP, "--config", str(config), "--watch"), tmp_path)
        screen = pane.wait_for(
            lambda s: "scaling to 3 processors:" in s, 60, "the scale in progress"
        )
        handoff = next(line for line in screen.splitlines() if "0 -> 2" in line)
        assert "PLANNED" in handoff and "━" in handoff and "0%" in handoff, screen
        pane.press("C-c")
        assert pane.wait_exit(30) == 0, pane.screen(history=True)
    finally:
        pane.close()
        if runner is not None:
            assert runner.stop() == 0, runner.output()[-3000:]


def test_expand_counts_down_the_fence_wait(tmp_path: Path, kafka_bootstrap: str) -> None:
    require_tmux()
    words = unique("words")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("fence"),
        inputs=[
            {
                "topic": words,
                "partitions": 2,
                "producer_lease_ms": 2000,
                "producer_delivery_timeout_ms": 3000,
            }
        ],
        initial_processors=2,
    )
    # through a pipe: occasional plain lines, the first and the last always
    grown = subprocess.run(
        cli("expand", APP, "--config", str(config), "--topic", words, "--partitions", "4"),
        capture_output=True,
        text=True,
        timeout=120,
        env=plain_environment(),
        check=False,
    )
    assert grown.returncode == 0, grown.stderr
    assert f"{words}: partitions 2 -> 4" in grown.stdout
    assert "waiting" in grown.stdout and "producers' lease (2000 ms)" in grown.stdout
    countdown = [line for line in grown.stderr.splitlines() if line.startswith("fence wait: ")]
    assert countdown, grown.stderr
    assert re.search(r": 0s left of [56]s$", countdown[-1]), countdown
    assert ESC not in grown.stdout + grown.stderr

    # in a terminal: a bar counting down, then the result
    pane = TmuxPane(
        cli("expand", APP, "--config", str(config), "--topic", words, "--partitions", "8"),
        tmp_path,
    )
    try:
        pane.wait_for(
            lambda s: any(
                line.startswith("fence wait") and "━" in line and "s left of " in line
                for line in s.splitlines()
            ),
            60,
            "the fence wait's bar",
        )
        assert pane.wait_exit(120) == 0
        screen = pane.screen(history=True)
        assert f"{words}: partitions 2 -> 4 -> 8" in screen
        assert "marker for partition 7" in screen
        assert re.search(r"fence wait .*━.* 0s left of [56]s", screen), screen
    finally:
        pane.close()
    assert splitstate("status", APP, "--config", str(config)).returncode == 0


@pytest.mark.spark
def test_backfill_shows_its_progress(tmp_path: Path, kafka_bootstrap: str) -> None:
    require_tmux()
    words = unique("history")
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("backfill"),
        inputs=[{"topic": words, "partitions": 4}],
        outputs=[{"topic": unique("counts"), "partitions": 4}],
        initial_processors=2,
        spark={"shards": 4},
    )
    produce(kafka_bootstrap, words, ((f"w{i % 60}".encode(), b"") for i in range(2000)))

    # through a pipe: plain lines, the last when the job is done
    built = subprocess.run(
        cli("backfill", APP, "--config", str(config)),
        capture_output=True,
        text=True,
        timeout=600,
        env=plain_environment(),
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert "backfill: 2000 records read" in built.stdout
    assert "backfill done: 2,000 records read, 2,000 applied" in built.stderr
    assert ESC not in built.stdout + built.stderr

    # in a terminal: the bar, full when done, above the result
    pane = TmuxPane(cli("backfill", APP, "--config", str(config), "--replace"), tmp_path)
    try:
        assert pane.wait_exit(600) == 0, pane.screen(history=True)
        screen = pane.screen(history=True)
        assert "backfill: 2000 records read" in screen
        assert re.search(r"backfill done .*━.* 100% 2,000 records read, 2,000 applied", screen), (
            screen
        )
    finally:
        pane.close()
