"""Config: file + environment, validation messages that name the field and fix, masking."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from framework import App, AppConfig, ConfigError
from framework.kafka import Clients, settings_check

BASE = """
app_id: demo
kafka:
  bootstrap_servers: 127.0.0.1:1
  settings:
    sasl.mechanisms: PLAIN
    sasl.username: demo
    sasl.password: hunter2
    security.protocol: SASL_SSL
inputs: [{topic: words, partitions: 8}]
outputs: [{topic: counts}]
initial_processors: 2
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS", "127.0.0.1:2")
    monkeypatch.setenv("SPLITSTATE_PROCESSORS", "4")
    config = AppConfig.load(write(tmp_path, BASE))
    assert config.kafka.bootstrap_servers == "127.0.0.1:2"
    assert config.kafka.settings["security.protocol"] == "SASL_SSL"  # merged, not replaced
    assert config.processors == 4
    assert config.dead_letters == "demo-dead-letters"
    assert config.app_state_dir == Path(".splitstate/state/demo")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('{"sasl.password": "Sup3rS3cretPW', r"SPLITSTATE_KAFKA__SETTINGS is not valid JSON \("),
        ("Sup3rS3cretPW", r"config field 'kafka' \(SPLITSTATE_KAFKA__SETTINGS\) cannot be read"),
    ],
)
def test_a_variable_that_is_no_json_is_named_without_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv("SPLITSTATE_KAFKA__SETTINGS", value)
    with pytest.raises(ConfigError, match=expected) as raised:
        AppConfig.load(write(tmp_path, BASE))
    assert "Sup3rS3cretPW" not in str(raised.value)
    assert "Fix:" in str(raised.value)


def test_toml_works_too(tmp_path: Path) -> None:
    text = """
app_id = "demo"
initial_processors = 1
[[inputs]]
topic = "words"
"""
    config = AppConfig.load(write(tmp_path, text, "c.toml"))
    assert config.inputs[0].topic == "words"
    assert config.processor_count == 1


def test_secrets_never_print(tmp_path: Path) -> None:
    config = AppConfig.load(write(tmp_path, BASE))
    assert "hunter2" not in repr(config)
    assert "hunter2" not in str(config)
    assert "hunter2" not in str(config.redacted())
    assert config.redacted()["kafka"]["settings"]["sasl.password"] == "*****"
    assert config.kafka.client_settings()["sasl.password"] == "hunter2"  # clients still get it


def test_errors_name_field_and_fix(tmp_path: Path) -> None:
    text = "app_id: 'has space'\ninputs: []\nprocesors: 3\nbatch: {max_records: 0}\n"
    with pytest.raises(ConfigError) as caught:
        AppConfig.load(write(tmp_path, text))
    message = str(caught.value)
    assert "app_id: app_id 'has space' may only use letters" in message
    assert "inputs: List should have at least 1 item" in message
    with pytest.raises(ConfigError) as missing:
        AppConfig.load(write(tmp_path, "inputs: [words]\n", "missing.yaml"))
    assert "app_id: Field required (fix: add it to the config file or set " in str(missing.value)
    assert "SPLITSTATE_APP_ID" in str(missing.value)
    assert "procesors: Extra inputs are not permitted (fix: did you mean processors?" in message
    assert "batch.max_records: Input should be greater than or equal to 1" in message


def test_processors_below_initial_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"processors \(1\) cannot be below initial_processors"):
        AppConfig.load(write(tmp_path, BASE + "processors: 1\n"))


@pytest.mark.parametrize("topic", ["__splitstate_topics", "{app}-splitstate-control"])
def test_splitstates_own_topics_cannot_be_the_dead_letter_topic(tmp_path: Path, topic: str) -> None:
    """A review found the dead-letter topic could name the registry or the control log (a
    first start then failed with Kafka's "Duplicate topic name", or made the registry a
    deleting topic)."""
    app_id = AppConfig.load(write(tmp_path, BASE)).app_id
    text = BASE + f"dead_letter_topic: {topic.format(app=app_id)}\n"
    with pytest.raises(ConfigError, match="are splitstate's own"):
        AppConfig.load(write(tmp_path, text))


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        AppConfig.load(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match=r"must end in \.yaml, \.yml or \.toml"):
        AppConfig.load(write(tmp_path, "x", "c.ini"))
    with pytest.raises(ConfigError, match="is not valid yaml"):
        AppConfig.load(write(tmp_path, "a: [1,", "bad.yaml"))


def test_crash_limit_defaults_to_three_and_must_be_positive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert AppConfig.load(write(tmp_path, BASE)).crash_limit == 3
    monkeypatch.setenv("SPLITSTATE_CRASH_LIMIT", "0")
    with pytest.raises(ConfigError, match="crash_limit: Input should be greater than or equal"):
        AppConfig.load(write(tmp_path, BASE))


def test_an_environment_variable_naming_no_field_is_an_error_naming_the_closest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pydantic-settings would ignore it and leave the default (at-least-once would stay
    exactly-once without a word)."""
    monkeypatch.setenv("SPLITSTATE_PROCESSING_GUARANTE", "at-least-once")
    monkeypatch.setenv("SPLITSTATE_BATCH__MAX_RECORD", "10")
    with pytest.raises(ConfigError) as raised:
        AppConfig.load(write(tmp_path, BASE))
    message = str(raised.value)
    assert "SPLITSTATE_PROCESSING_GUARANTE names no config field" in message
    assert "did you mean SPLITSTATE_PROCESSING_GUARANTEE?" in message
    assert "did you mean SPLITSTATE_BATCH__MAX_RECORDS?" in message


def test_variables_of_fields_mapping_keys_and_the_frameworks_own_are_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPLITSTATE_PROCESSING_GUARANTEE", "at-least-once")
    monkeypatch.setenv("SPLITSTATE_BATCH__MAX_RECORDS", "10")
    monkeypatch.setenv("SPLITSTATE_SPARK__SETTINGS__SPARK_EXECUTOR_CORES", "1")
    monkeypatch.setenv("SPLITSTATE_FAULT", "")
    monkeypatch.setenv("SPLITSTATE_CACHE_DIR", str(tmp_path))
    config = AppConfig.load(write(tmp_path, BASE))
    assert config.processing_guarantee == "at-least-once"
    assert config.batch.max_records == 10


def test_kafka_settings_librdkafka_refuses_are_a_config_error_before_any_client(
    tmp_path: Path,
) -> None:
    """The app's clients start from ``Clients.of(config)``: it refuses them first."""
    Clients.of(AppConfig.load(write(tmp_path, BASE)))  # a valid set passes
    typo = BASE.replace("security.protocol: SASL_SSL", "secutiry.protocol: SASL_SSL")
    with pytest.raises(ConfigError, match=r'No such configuration property: "secutiry\.protocol"'):
        Clients.of(AppConfig.load(write(tmp_path, typo)))
    bad = BASE.replace("sasl.mechanisms: PLAIN", "sasl.mechanisms: NOPE")
    with pytest.raises(ConfigError, match=r"kafka\.settings: librdkafka refuses"):
        Clients.of(AppConfig.load(write(tmp_path, bad)))


def test_a_refusal_quoting_a_secret_value_masks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka quotes some values it refuses; a secret one never reaches the message.
    (Stands in for a refusal of a secret's value, which a real build seldom makes.)"""

    def refusing(_settings: object) -> None:
        reason = 'Invalid value "hunter2" for configuration property "sasl.password"'
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG, reason))

    monkeypatch.setattr(settings_check, "Producer", refusing)
    with pytest.raises(ConfigError, match="librdkafka refuses") as raised:
        settings_check.check_kafka_settings({"sasl.password": "hunter2", "sasl.username": "m"})
    assert "hunter2" not in str(raised.value) and '"*****"' in str(raised.value)


def test_a_bad_value_from_the_environment_names_the_variable_not_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a new user: SPLITSTATE_BATCH__MAX_RECORDS=lots blamed the config file."""
    monkeypatch.setenv("SPLITSTATE_BATCH__MAX_RECORDS", "lots")
    path = write(tmp_path, BASE)
    with pytest.raises(ConfigError) as caught:
        AppConfig.load(path)
    message = str(caught.value)
    assert str(path) not in message, message
    assert "batch.max_records: Input should be a valid integer" in message
    assert "set by environment variable SPLITSTATE_BATCH__MAX_RECORDS" in message, message
    monkeypatch.setenv("SPLITSTATE_INPUTS", '[{"topic": "words", "partitons": 8}]')
    with pytest.raises(ConfigError) as caught:
        AppConfig.load(path)
    assert "inputs.0.partitons" in str(caught.value)
    assert "set by environment variable SPLITSTATE_INPUTS" in str(caught.value)


def test_a_field_missing_in_a_list_entry_suggests_no_variable_that_does_not_exist(
    tmp_path: Path,
) -> None:
    """Found by a new user: a typo under `inputs` suggested SPLITSTATE_INPUTS_TOPIC."""
    text = BASE.replace("inputs: [{topic: words, partitions: 8}]", "inputs: [{topc: words}]")
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        AppConfig.load(path)
    message = str(caught.value)
    assert f"invalid app config in {path}:" in message
    assert "SPLITSTATE_INPUTS_TOPIC" not in message, message
    assert "inputs.0.topic: Field required (fix: add it to inputs[0] in the config file" in message
    assert "inputs.0.topc: Extra inputs are not permitted (fix: did you mean topic?" in message


def test_an_app_configured_in_code_needs_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37 §2: config in code with defaults; topics by name; the YAML file optional."""
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    app = App(app_id="shop", inputs=["orders"], outputs=["totals"], initial_processors=2)
    config = app.config
    assert [(t.topic, t.partitions) for t in config.inputs] == [("orders", 2)]
    assert [(t.topic, t.partitions) for t in config.outputs] == [("totals", 1)]
    assert config.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert App(app_id="shop", inputs=["orders"]).config.initial_processors == 1
    with pytest.raises(ConfigError, match="got a config and settings"):
        App(config, app_id="other")


def test_kafkas_usual_variable_names_the_broker_unless_splitstates_or_the_config_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "kafka-a:9092")
    assert AppConfig.load(None, app_id="s", inputs=["i"]).kafka.bootstrap_servers == "kafka-a:9092"
    given = AppConfig.load(None, app_id="s", inputs=["i"], kafka={"bootstrap_servers": "b:1"})
    assert given.kafka.bootstrap_servers == "b:1"
    monkeypatch.setenv("SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS", "kafka-c:9092")
    assert AppConfig.load(None, app_id="s", inputs=["i"]).kafka.bootstrap_servers == "kafka-c:9092"
