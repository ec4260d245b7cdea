"""`splitstate status` and `scale` stop at a control-log record no reader can read and name
it; `splitstate control drop` removes it (a tombstone of its key on the real broker), after
which they read past it; it refuses a record that can be read."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.kafka import Clients
from framework.loader import load_app
from tests.integration.harness import create_app, splitstate, unique

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"


def test_status_names_an_unreadable_control_record_and_drop_removes_it(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    config = create_app(
        tmp_path,
        kafka_bootstrap,
        APP,
        app_id=unique("dropcmd"),
        inputs=[{"topic": unique("words"), "partitions": 2}],
        outputs=[{"topic": unique("counts"), "partitions": 2}],
        initial_processors=1,
    )
    topic = load_app(APP, config).config.control_topic
    kafka = Clients({"bootstrap.servers": kafka_bootstrap})
    try:
        offset = kafka.append(topic, [(b"junk/1", b'{"type": "scale", "generation": "1"}')]) - 1
    finally:
        kafka.close()

    status = splitstate("status", APP, "--config", str(config))
    assert status.returncode == 2, status.stdout
    assert f"control log {topic!r} holds a record that cannot be read, at offset {offset}" in (
        status.stderr
    )
    assert f"`splitstate control drop MODULE:APP --offset {offset}`" in status.stderr
    assert "Traceback" not in status.stderr
    scale = splitstate("scale", APP, "--config", str(config), "--processors", "2")
    assert scale.returncode == 2 and f"at offset {offset} " in scale.stderr

    drop = ["control", "drop", APP, "--config", str(config), "--offset"]
    missing = splitstate(*drop, str(offset + 7))
    assert missing.returncode == 2
    assert f"holds no record at offset {offset + 7}; nothing was dropped" in missing.stderr
    dropped = splitstate(*drop, str(offset))
    assert dropped.returncode == 0, dropped.stderr
    assert f"dropped the record at offset {offset} of control log {topic!r}" in dropped.stdout
    tombstone = splitstate(*drop, str(offset + 1))
    assert tombstone.returncode == 2 and "a tombstone or a keyless record" in tombstone.stderr

    status = splitstate("status", APP, "--config", str(config))
    assert status.returncode == 0, status.stderr
