"""Deleting input partitions and growing them back, live: 4 -> 8 -> 5 -> 7 -> 4 -> 6.

Two producers write, per key, strictly increasing sequence numbers while `splitstate expand`
takes the topic through growths and deletions (KIP-253 sections 2 and 3); two apps with 2
processors each read it. Every (key, producer) sequence must arrive exactly 1..n in order, the
wordcount must be exact, no key's state may sit on a second processor, no record may be
dead-lettered, and Kafka keeps every partition it ever had, their offsets going on.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from framework.coordination.registry import TopicRegistry
from framework.growth.expand import expand_topic
from framework.growth.placement import COUNT_HEADER
from framework.kafka import Clients
from rebalance import bucket, key_hash
from tests.integration.harness import Supervised, TopicReader, splitstate, unique
from tests.integration.test_growth import (
    SEQUENCES,
    WORDCOUNT,
    SequenceProducer,
    check_counts,
    check_placement,
    check_sequences,
    read_all,
    seq_config_id,
    stop_producing,
    two_apps,
)

pytestmark = pytest.mark.integration

HISTORY = (8, 5, 7, 4, 6)


def test_4_8_5_7_4_6_keeps_every_key_exact(tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = unique("events")
    apps = two_apps(tmp_path, kafka_bootstrap, topic)
    seq_dir, count_dir, seq_config, count_config = (
        apps.seq_dir,
        apps.count_dir,
        apps.seq_config,
        apps.count_config,
    )
    seq_out, counts_out = apps.seq_out, apps.counts_out
    runners = [
        Supervised(SEQUENCES, seq_config, seq_dir / "state", seq_dir / "run.log"),
        Supervised(WORDCOUNT, count_config, count_dir / "state", count_dir / "run.log"),
    ]
    client: dict[str, str | int | float | bool] = {"bootstrap.servers": kafka_bootstrap}
    producers = [SequenceProducer(kafka_bootstrap, topic, name) for name in ("a", "b")]
    earlier: list[int] = []  # exit codes of runs stopped on purpose
    earlier_logs: list[str] = []
    seq_reader = TopicReader(kafka_bootstrap, seq_out, 4)
    count_reader = TopicReader(kafka_bootstrap, counts_out, 4)
    try:
        for producer in producers:
            producer.start()
        seq_reader.wait_for(lambda r: len(r.records) > 2000, timeout=120, what="outputs")
        for partitions in HISTORY:
            if partitions == 5:
                # the sequences app is down through this shrink (a backlog in every partition
                # when it comes back: it must drain 5, 6 and 7 before the merged keys' new
                # records in 1, 2 and 3), and its `expand` dies once the count is recorded
                earlier.append(runners[0].stop())
                earlier_logs.append(runners[0].output())
                stopped = expand_topic(
                    Clients(client), topic, 5, report=lambda _line: None, stop_after="recorded"
                )
                assert stopped.growth is not None and stopped.growth.kind == "shrink"
            changed = splitstate(
                "expand", SEQUENCES, "--config", str(seq_config), "--topic", topic,
                "--partitions", str(partitions), timeout=180,
            )  # fmt: skip
            assert changed.returncode == 0, changed.stderr
            assert f"now has {partitions} partitions" in changed.stdout, changed.stdout
            if partitions == 5:
                time.sleep(3)
                log = seq_dir / "run-after-shrink.log"
                runners[0] = Supervised(SEQUENCES, seq_config, seq_dir / "state", log)
            time.sleep(2)
        time.sleep(3)
        stop_producing(producers, seq_reader, count_reader)
        status = splitstate("status", SEQUENCES, "--config", str(seq_config))
        assert status.returncode == 0, status.stderr
        assert f"input {topic}: partitions 4 -> 8 -> 5 -> 7 -> 4 -> 6" in status.stdout
    finally:
        logs = []
        for runner in runners:
            assert runner.stop() == 0, runner.output()[-3000:]
            logs.append(runner.output())
        seq_reader.close()
        count_reader.close()
    assert earlier == [0], earlier_logs
    logs[0] = "".join(earlier_logs) + logs[0]

    # producers switched counts, both ways, without restarting
    assert {4, 8, 5, 7, 6} <= set().union(*(p.counts_used for p in producers))
    entry = TopicRegistry(Clients(client)).read()[topic]
    assert entry.history.counts == (4, *HISTORY)
    assert entry.history.created == 8
    assert entry.growth is None

    check_sequences(seq_reader, producers)
    dead = read_all(kafka_bootstrap, f"{seq_config_id(seq_config)}-dead-letters", 1)
    assert dead == [], [h.get("splitstate.error") for _, _, h in dead[:3]]
    check_counts(count_reader, producers)
    for state_dir in (seq_dir / "state", count_dir / "state"):
        check_placement(state_dir)
    # every record sits where the count it was placed with puts its key; Kafka kept 8
    # partitions, and the deleted ones were written again after their regrowth
    written = read_all(kafka_bootstrap, topic, 8)
    for partition, raw_key, headers in written:
        if COUNT_HEADER in headers:
            assert partition == bucket(key_hash(raw_key), 4, int(headers[COUNT_HEADER]))
    used = {partition for partition, _key, _headers in written}
    assert used == set(range(8))
    # a survivor held its merged keys' records at some point (8 -> 5: 1, 2, 3; 7 -> 4: 0..3)
    assert re.search(r"\[[0-3]\] is held back at offset \d+", logs[0]), logs[0][-3000:]
