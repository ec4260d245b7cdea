"""A config holding a planted secret in every secret place (``kafka.settings``,
``spark.settings``, ``spark.kafka_options``, ``snapshots.url``): no command prints one, on
stdout, stderr or in its log lines, whether it succeeds or fails; and under
``--log-format json`` the error that ends ``run`` is a JSON line too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from tests.integration.harness import unique
from tests.s3_server import s3_server

pytestmark = pytest.mark.integration

APP = "examples.wordcount.app:app"
ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
#: AWS's documented example secret key: it holds '/', which pyarrow cannot parse in a URL
SLASHED = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#: a secret pyarrow parses (moto's S3 takes any credentials)
PLAIN = "PlantedS3Secret0123456789"
SETTINGS = {
    "kafka": {
        "sasl.password": "PlantedSaslPassword",
        "sasl.oauthbearer.config": "principal=svc clientSecret=PlantedOauthSecret",
        "ssl.key.password": "PlantedSslKeyPassword",
    },
    "spark": {
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "PlantedAzureKey",
        "spark.hadoop.fs.s3a.secret.key": "PlantedS3aSecret",
    },
    "spark_kafka": {"kafka.sasl.jaas.config": "x required password='PlantedJaasPassword';"},
}
PLANTED = (
    SLASHED,
    "wJalrXUtnFEMI",  # the slashed secret's parts: pyarrow quotes it up to a '/'
    "bPxRfiCYEXAMPLEKEY",
    PLAIN,
    "PlantedSaslPassword",
    "PlantedOauthSecret",
    "PlantedSslKeyPassword",
    "PlantedAzureKey",
    "PlantedS3aSecret",
    "PlantedJaasPassword",
)


def _config(directory: Path, bootstrap: str, url: str, app_id: str) -> Path:
    data = {
        "app_id": app_id,
        "kafka": {"bootstrap_servers": bootstrap, "settings": SETTINGS["kafka"]},
        "inputs": [{"topic": f"{app_id}-words", "partitions": 1}],
        "outputs": [{"topic": f"{app_id}-counts", "partitions": 1}],
        "initial_processors": 1,
        "state_dir": str(directory / "state"),
        "spark": {"settings": SETTINGS["spark"], "kafka_options": SETTINGS["spark_kafka"]},
        "snapshots": {"url": url},
    }
    path = directory / f"{app_id}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _splitstate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framework.ops.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _clean(result: subprocess.CompletedProcess[str]) -> str:
    """``result``'s stdout and stderr, asserted to hold no planted secret."""
    output = result.stdout + result.stderr
    leaked = [secret for secret in PLANTED if secret in output]
    assert leaked == [], f"{result.args[3:]} printed {leaked}:\n{output}"
    return output


def test_snapshot_commands_never_print_the_stores_credentials(tmp_path: Path) -> None:
    """`snapshot list` and `state dump --snapshot`, on a store they reach and on a URL
    pyarrow cannot parse (a secret with '/')."""
    with s3_server() as endpoint:
        url = (
            f"s3://{ACCESS_KEY}:{PLAIN}@snapshots/{unique('p')}?endpoint_override={endpoint}"
            "&scheme=http&region=us-east-1"
        )
        config = str(_config(tmp_path, "127.0.0.1:1", url, unique("secrets")))
        listed = _splitstate("snapshot", "list", APP, "--config", config, "--processor", "0")
        assert listed.returncode == 0, listed.stderr
        assert "snapshot store s3://*****@snapshots/" in _clean(listed)
        assert f"endpoint_override={endpoint}" in listed.stdout  # what helps is still shown
        dump = ("state", "dump", "--snapshot", APP, "--config", config, "--processor", "0")
        missing = _splitstate(*dump, "--snapshot-id", "nope")
        assert missing.returncode == 2
        assert "has no snapshot nope in s3://*****@snapshots/" in _clean(missing)
    slashed = _config(tmp_path, "127.0.0.1:1", f"s3://{ACCESS_KEY}:{SLASHED}@b/p", unique("s"))
    for command in (("snapshot", "list", APP), ("state", "dump", "--snapshot", APP)):
        failed = _splitstate(*command, "--config", str(slashed), "--processor", "0")
        assert failed.returncode == 2
        assert "snapshots.url cannot be used: Cannot parse URI" in _clean(failed)
        assert "Traceback" not in failed.stderr


def test_a_yaml_error_in_a_secrets_line_is_reported_without_the_line(tmp_path: Path) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text(
        "app_id: broken\ninputs: [{topic: in}]\ninitial_processors: 1\nkafka:\n  settings:\n"
        '    sasl.password: "PlantedSaslPassword\n    sasl.username: bob\n'
    )
    commands = (("run", APP, "--processor-id", "0"), ("status", APP), ("topics", "create", APP))
    for command in commands:
        result = _splitstate(*command, "--config", str(config))
        assert result.returncode == 2
        assert "is not valid yaml" in _clean(result) and "line 6, column 20" in result.stderr


def test_status_and_run_never_print_a_secret_and_runs_json_error_is_json(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    app_id = unique("secrets")
    config = str(_config(tmp_path, kafka_bootstrap, f"s3://{ACCESS_KEY}:{SLASHED}@b/p", app_id))
    created = _splitstate("topics", "create", APP, "--config", config)
    assert created.returncode == 0, created.stderr
    _clean(created)

    status = _splitstate("status", APP, "--config", config)
    assert status.returncode == 0, status.stderr
    output = _clean(status)
    assert "snapshots in s3://*****@b/p:" in output and "cannot read the store" in output

    text_run = _splitstate("run", APP, "--config", config, "--processor-id", "0")
    assert text_run.returncode == 2
    assert "splitstate: error: snapshots.url cannot be used" in _clean(text_run)

    json_run = _splitstate(
        "--log-format", "json", "run", APP, "--config", config, "--processor-id", "0"
    )
    assert json_run.returncode == 2
    _clean(json_run)
    lines = []
    for line in json_run.stderr.splitlines():
        try:
            lines.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line!r}")
    last = lines[-1]
    assert last["level"] == "CRITICAL" and last["app"] == app_id and last["processor"] == 0
    assert str(last["message"]).startswith("snapshots.url cannot be used")
