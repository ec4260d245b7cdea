"""``KafkaClientConfig``: how ``splitstate tail TOPIC`` reaches Kafka without an app: a config
file's ``kafka`` section under the ``SPLITSTATE_KAFKA__*`` variables, security settings too
(issue 37: without ``--app`` tail had none, only a bootstrap address)."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.config import ConfigError
from framework.config_client import KafkaClientConfig
from framework.ops.cli import main


@pytest.fixture(autouse=True)
def _no_kafka_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SPLITSTATE_KAFKA__SETTINGS", raising=False)


def test_the_files_kafka_section_under_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "app_id: shop\ninputs: [{topic: orders}]\n"
        "kafka:\n  bootstrap_servers: broker:9092\n"
        "  settings: {security.protocol: SASL_SSL, sasl.mechanism: PLAIN}\n"
    )
    kafka = KafkaClientConfig.load(config)
    assert kafka.client_settings() == {
        "bootstrap.servers": "broker:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
    }
    monkeypatch.setenv("SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS", "other:9093")
    assert KafkaClientConfig.load(config).bootstrap_servers == "other:9093"
    assert KafkaClientConfig.load(None).bootstrap_servers == "other:9093"
    monkeypatch.setenv("SPLITSTATE_KAFKA__SETTINGS", '{"security.protocol": "SSL"}')
    assert KafkaClientConfig.load(None).settings == {"security.protocol": "SSL"}


def test_without_anything_kafkas_usual_variable_then_localhost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert KafkaClientConfig.load(None).bootstrap_servers == "127.0.0.1:9092"
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "usual:9092")
    assert KafkaClientConfig.load(None).bootstrap_servers == "usual:9092"


def test_a_bad_kafka_section_is_named(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("kafka:\n  bootstrap_server: typo:9092\n")
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap_server: Extra inputs"):
        KafkaClientConfig.load(config)


def test_tail_of_a_topic_applies_the_files_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A setting librdkafka refuses is refused before any connection: the file was read."""
    config = tmp_path / "client.yaml"
    config.write_text("kafka:\n  settings: {security.protocol: carrier-pigeon}\n")
    assert main(["tail", "orders", "--config", str(config), "--idle-seconds", "1"]) == 2
    assert "security.protocol" in capsys.readouterr().err


def test_a_misspelt_or_unparsable_kafka_variable_is_named_not_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review: a misspelt variable was silently ignored (the default broker was tried), and a
    value that is no JSON crashed with a traceback; an app's config refuses both."""
    monkeypatch.setenv("SPLITSTATE_KAFKA_BOOTSTRAP_SERVERS", "typo:1")
    with pytest.raises(ConfigError, match="SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS"):
        KafkaClientConfig.load(None)
    monkeypatch.delenv("SPLITSTATE_KAFKA_BOOTSTRAP_SERVERS")
    monkeypatch.setenv("SPLITSTATE_APP_ID", "shop")  # (not kafka's: left alone)
    monkeypatch.setenv("SPLITSTATE_KAFKA__SETTINGS", '{"sasl.password": "hunter2", "x": 1')
    with pytest.raises(ConfigError, match="SPLITSTATE_KAFKA__SETTINGS") as refused:
        KafkaClientConfig.load(None)
    assert "hunter2" not in str(refused.value)
