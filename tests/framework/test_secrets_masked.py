"""Secrets in a config never printed, through what splitstate had before ``framework.redaction``:
the config's ``repr``/``str``/``redacted()``, YAML and TOML syntax errors, the snapshot
store's errors and ``repr``, and ``status``'s snapshot section. The planted values are
reused by ``test_redaction``."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.config import (
    AppConfig,
    ConfigError,
    KafkaConfig,
    SnapshotConfig,
    SparkConfig,
    TopicConfig,
)
from framework.ops.snapshot_status import collect_snapshots
from statestore import StateStoreError
from statestore.snapshot_store import SnapshotStore

#: AWS's documented example keys (the secret has '/', as AWS secret keys often do)
ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # noqa: S105 - a planted one
MASK = "*****"


def planted_config() -> AppConfig:
    """A config with a planted secret in every secret place (its secrets: ``PLANTED``)."""
    return AppConfig(
        app_id="a",
        inputs=[TopicConfig(topic="in")],
        initial_processors=1,
        kafka=KafkaConfig(
            settings={
                "sasl.password": "KAFKAPW-planted",
                "sasl.oauthbearer.config": "principal=svc clientSecret=OAUTHCFG-planted",
                "sasl.username": "bob",
            }
        ),
        spark=SparkConfig(
            settings={
                "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "AZUREKEY-planted",
                "spark.hadoop.fs.s3a.secret.key": "S3A-planted",
            },
            kafka_options={"kafka.sasl.jaas.config": "password='JAAS-planted'"},
        ),
        snapshots=SnapshotConfig(url=f"s3://{ACCESS_KEY}:{AWS_SECRET}@bucket/prefix"),
    )


PLANTED = (
    "KAFKAPW-planted",
    "OAUTHCFG-planted",
    "AZUREKEY-planted",
    "S3A-planted",
    "JAAS-planted",
    AWS_SECRET,
    "wJalrXUtnFEMI",  # the part before its first '/'
)


def test_the_configs_repr_str_and_redacted_form_mask_every_secret() -> None:
    config = planted_config()
    shown = [repr(config), str(config), str(config.redacted())]
    shown += [repr(config.kafka), repr(config.spark), repr(config.snapshots), str(config.spark)]
    for text in shown:
        for secret in PLANTED:
            assert secret not in text, (secret, text)
    redacted = config.redacted()
    assert redacted["snapshots"]["url"] == "s3://*****@bucket/prefix"
    assert redacted["kafka"]["settings"]["sasl.username"] == "bob"
    assert redacted["kafka"]["settings"]["sasl.oauthbearer.config"] == MASK
    assert config.snapshots.url is not None and AWS_SECRET in config.snapshots.url  # still used


def test_a_yaml_syntax_error_says_where_without_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "app_id: a\ninputs: [{topic: in}]\ninitial_processors: 1\nkafka:\n  settings:\n"
        '    sasl.password: "Sup3rS3cretPW\n    sasl.username: bob\n'
    )
    with pytest.raises(ConfigError) as raised:
        AppConfig.load(path)
    message = str(raised.value)
    assert "Sup3rS3cretPW" not in message and "sasl.password" not in message
    assert f"config file {path} is not valid yaml" in message
    assert "line 6, column 20" in message  # where the quoted value starts


def test_a_toml_syntax_error_says_where_without_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('app_id = "a"\n[kafka.settings]\n"sasl.password" = "Sup3rS3cretPW\n')
    with pytest.raises(ConfigError) as raised:
        AppConfig.load(path)
    assert "Sup3rS3cretPW" not in str(raised.value)
    assert "line 3" in str(raised.value)


def test_the_snapshot_stores_errors_and_repr_never_repeat_its_url(tmp_path: Path) -> None:
    url = f"s3://{ACCESS_KEY}:{AWS_SECRET}@bucket/prefix"
    with pytest.raises(StateStoreError, match=r"snapshots\.url cannot be used") as raised:
        SnapshotStore(url, "app")
    assert "wJalrXUtnFEMI" not in str(raised.value) and ACCESS_KEY not in str(raised.value)
    store = SnapshotStore(str(tmp_path), "app")
    assert repr(store) == f"SnapshotStore(local:{str(tmp_path)!r}, 'app')"


def test_statuss_snapshot_section_masks_the_url() -> None:
    config = planted_config()
    report = collect_snapshots(config, [0], {}, 0.0)
    assert report is not None
    text = "\n".join(report.render())
    assert "snapshots in s3://*****@bucket/prefix:" in text
    assert "cannot read the store" in text
    for secret in (*PLANTED, ACCESS_KEY):
        assert secret not in text


def test_a_validation_error_never_repeats_a_secret_value(tmp_path: Path) -> None:
    """The problems name the field and the fix, never the value given (pydantic's own
    message, ``str(ValidationError)``, would)."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "app_id: a\ninputs: [{topic: in}]\ninitial_processors: 1\n"
        "kafka: {settings: {sasl.password: [KAFKAPW-planted]}}\n"
        f"snapshots: {{url: 's3://{ACCESS_KEY}:{AWS_SECRET}@b/p', keep: 0, kep: 1}}\n"
    )
    with pytest.raises(ConfigError) as raised:
        AppConfig.load(path)
    message = str(raised.value)
    assert "kafka.settings.sasl.password" in message and "snapshots.keep" in message
    for secret in (*PLANTED, ACCESS_KEY):
        assert secret not in message
