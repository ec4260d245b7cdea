"""A record whose header name is not UTF-8, on the real broker (issue 33, item 5).

confluent-kafka cannot decode such a name: its ``Message.headers()`` raises. Before the fix
that ended every run of the processor (the placement check reads the record's headers), and
the crash guard's skip read them again: the partition never moved and no dead letter was
written. Now the record is a dead letter (stage ``decode``) holding its key and value, the
records after it are processed, and a rebuild of lost state skips it without a second dead
letter.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from framework.growth.placement import COUNT_HEADER
from framework.loader import load_app
from framework.records import UNREADABLE_HEADERS, UNREADABLE_HEADERS_HEADER
from framework.runtime.loop import ProcessorRuntime
from rebalance import bucket, key_hash
from statestore import processor_path
from tests.integration.harness import TopicReader, create_app, produce, splitstate, unique
from tests.integration.raw_records import produce_raw
from tests.integration.test_unplaced_records import state_counts

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"
BEFORE = 40  # records of the key before the bad one
TOTAL = BEFORE + 3


def bad_header_input(tmp_path: Path, bootstrap: str) -> tuple[Path, str, str, int]:
    """The app's config, input and dead-letter topics, and the offset of the bad record: the
    input holds ``BEFORE`` records of ``apple``, the bad one, one more ``apple`` and a
    ``pear``."""
    topic, dead = unique("words"), unique("dead")
    config = create_app(
        tmp_path,
        bootstrap,
        APP,
        app_id=unique("bad-header"),
        inputs=[{"topic": topic, "partitions": 2}],
        outputs=[{"topic": unique("counts"), "partitions": 2}],
        initial_processors=1,
        dead_letter_topic=dead,
    )
    # enough records before it that the interpreter specialized the calls reading headers:
    # confluent-kafka's headers() then returns a broken list without raising (see
    # framework.records.readable_headers)
    produce(bootstrap, topic, [(b"apple", b"before")] * BEFORE)
    bad = produce_raw(
        bootstrap,
        topic,
        bucket(key_hash(b"apple"), 2, 2),
        key=b"apple",
        value=b"evil",
        headers=[(b"\xff\xfe", b"x"), (COUNT_HEADER.encode(), b"2")],
    )
    produce(bootstrap, topic, [(b"apple", b"after"), (b"pear", b"")])
    return config, topic, dead, bad


def test_a_record_whose_header_name_is_not_utf8_is_a_dead_letter_and_the_partition_moves(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    config, topic, dead, bad = bad_header_input(tmp_path, kafka_bootstrap)
    partition = bucket(key_hash(b"apple"), 2, 2)
    app = load_app(APP, config)
    live = ProcessorRuntime(app, 0).run(until=lambda stats: stats.records >= TOTAL)
    assert (live.records, live.outputs, live.dead_letters) == (TOTAL, TOTAL - 1, 1)
    state_dir = app.config.app_state_dir
    assert state_counts(state_dir, 0) == {"apple": BEFORE + 1, "pear": 1}
    letters = TopicReader(kafka_bootstrap, dead, 1)
    try:
        letters.wait_for(lambda r: len(r.records) >= 1, timeout=30, what="the dead letter")
        ((key, value, headers),) = letters.records
        assert (key, value) == (b"apple", b"evil")
        fields = dict(headers)
        assert fields[UNREADABLE_HEADERS_HEADER] == UNREADABLE_HEADERS
        assert fields["splitstate.stage"] == b"decode"
        assert fields["splitstate.topic"] == topic.encode()
        assert fields["splitstate.error"].startswith(b"its headers cannot be read")
        assert (fields["splitstate.partition"], fields["splitstate.offset"]) == (
            str(partition).encode(),
            str(bad).encode(),
        )
        assert COUNT_HEADER not in fields  # none of the record's own headers

        shutil.rmtree(processor_path(state_dir, 0))  # the disk is lost: rebuilt in restore mode
        rebuilt = ProcessorRuntime(app, 0).run(until=lambda s: s.restored >= TOTAL)
        assert (rebuilt.records, rebuilt.outputs, rebuilt.dead_letters) == (0, 0, 0)
        assert state_counts(state_dir, 0) == {"apple": BEFORE + 1, "pear": 1}
        letters.poll(2.0)
        assert len(letters.records) == 1  # none written again
    finally:
        letters.close()


@pytest.mark.spark
def test_spark_builds_the_state_the_runtime_builds_without_the_record(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    # Spark's Kafka source (Java) reads the name with U+FFFD for the bad bytes: the fold
    # skips the record as the runtime does
    config, _topic, _dead, _bad = bad_header_input(tmp_path, kafka_bootstrap)
    built = splitstate("backfill", APP, "--config", str(config), timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    figures = re.search(r"(\d+) records read: (\d+) applied, (\d+) dead letters", built.stdout)
    assert figures is not None, built.stdout
    assert tuple(map(int, figures.groups())) == (TOTAL, TOTAL - 1, 1), built.stdout
    state_dir = load_app(APP, config).config.app_state_dir
    assert state_counts(state_dir, 0) == {"apple": BEFORE + 1, "pear": 1}
