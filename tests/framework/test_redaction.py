"""``framework.redaction``: URLs' credentials masked whatever characters they hold, secret
settings known by name, a validated config's secrets scrubbed from any text, log lines and
the error that ends a command."""

from __future__ import annotations

import io
import logging
from argparse import Namespace

import orjson
import pytest

from framework.ops.cli._errors import report_error
from framework.ops.logs import ContextFilter, JsonFormatter
from framework.redaction import (
    RedactingFormatter,
    is_secret_key,
    mask_url,
    scrub,
    url_secrets,
)
from tests.framework.test_secrets_masked import ACCESS_KEY, AWS_SECRET, PLANTED, planted_config


def test_a_urls_user_info_is_masked_whatever_characters_the_secret_holds() -> None:
    for secret in (AWS_SECRET, "a:b@c/d?e", "p@ss/w:rd", "plain1234"):
        url = f"s3://{ACCESS_KEY}:{secret}@bucket/prefix?region=eu-west-1"
        masked = mask_url(url)
        assert masked == "s3://*****@bucket/prefix?region=eu-west-1", secret
        assert {secret, f"{ACCESS_KEY}:{secret}"} <= url_secrets(url)
    encoded = "s3://AKIA:wJalrXUtnFEMI%2FK7MDENG%2FbPxRfiCYEXAMPLEKEY@bucket/p"
    assert mask_url(encoded) == "s3://*****@bucket/p"
    assert AWS_SECRET in url_secrets(encoded)  # its decoded form too, as pyarrow may echo it


def test_query_values_are_masked_but_harmless_ones() -> None:
    url = "abfs://container/p?sv=2022&sig=SASSIGNATURE&endpoint_override=127.0.0.1:9000&scheme=http"
    assert mask_url(url) == (
        "abfs://container/p?sv=*****&sig=*****&endpoint_override=127.0.0.1:9000&scheme=http"
    )
    assert "SASSIGNATURE" in url_secrets(url)


def test_text_that_is_no_url_is_left_as_it_is() -> None:
    for text in ("/plain/path", "/home/me@corp/snapshots", "relative/dir", ""):
        assert mask_url(text) == text
        assert url_secrets(text) == set()


@pytest.mark.parametrize(
    "name",
    [
        "sasl.password",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.client.secret",
        "sasl.jaas.config",
        "kafka.sasl.jaas.config",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.keystore.password",
        "basic.auth.user.info",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.s3a.session.token",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
        "spark.hadoop.fs.azure.sas.container.acct.blob.core.windows.net",
        "spark.hadoop.fs.azure.account.oauth2.client.secret",
        "spark.hadoop.google.cloud.auth.service.account.json.keyfile",
        "spark.ssl.keyPassword",
    ],
)
def test_secret_settings_are_known_by_name(name: str) -> None:
    assert is_secret_key(name)


@pytest.mark.parametrize(
    "name",
    ["security.protocol", "sasl.mechanism", "acks", "spark.executor.memory", "sasl.username"],
)
def test_other_settings_are_shown(name: str) -> None:
    assert not is_secret_key(name)


def test_a_validated_configs_secrets_are_scrubbed_from_any_text() -> None:
    config = planted_config()
    raw = f"pyarrow: Cannot parse URI: '{config.snapshots.url}'; kafka said KAFKAPW-planted"
    text = scrub(raw)
    for secret in PLANTED:
        assert secret not in text
    assert "Cannot parse URI" in text and "kafka said *****" in text


def test_log_lines_mask_the_secrets_in_message_and_traceback() -> None:
    planted_config()
    text_stream, json_stream = io.StringIO(), io.StringIO()
    text_handler = logging.StreamHandler(text_stream)
    text_handler.setFormatter(RedactingFormatter("%(levelname)s %(message)s"))
    json_handler = logging.StreamHandler(json_stream)
    json_handler.setFormatter(JsonFormatter())
    json_handler.addFilter(ContextFilter())
    logger = logging.getLogger("test.redaction")
    logger.handlers, logger.propagate = [text_handler, json_handler], False
    try:
        raise OSError(f"cannot reach s3://{ACCESS_KEY}:{AWS_SECRET}@bucket")
    except OSError as error:
        logger.exception("upload failed: %s (%s)", error, "KAFKAPW-planted")
    for secret in PLANTED:
        assert secret not in text_stream.getvalue()
        assert secret not in json_stream.getvalue()
    line = orjson.loads(json_stream.getvalue())
    assert line["message"] == "upload failed: cannot reach s3://*****@bucket (*****)"
    assert "OSError: cannot reach s3://*****@bucket" in line["exception"]


def _raised(message: str) -> RuntimeError:
    try:
        raise RuntimeError(message)
    except RuntimeError as error:
        return error


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_the_error_ending_a_command_masks_secrets_and_is_json_when_run_logs_json(
    log_format: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected error's traceback too; ``status`` keeps the plain line whatever the
    log format (only ``run`` logs)."""
    monkeypatch.delenv("SPLITSTATE_LOG_FORMAT", raising=False)
    planted_config()
    error = _raised(f"pyarrow: Cannot parse URI: 's3://{ACCESS_KEY}:{AWS_SECRET}@b/p'")
    run = Namespace(command="run", log_format=log_format)
    report_error(run, error, with_traceback=False)
    report_error(run, error, with_traceback=True)
    report_error(Namespace(command="status", log_format=log_format), error, with_traceback=False)
    err = capsys.readouterr().err
    for secret in PLANTED:
        assert secret not in err
    lines = err.splitlines()
    assert lines[-1] == "splitstate: error: pyarrow: Cannot parse URI: 's3://*****@b/p'"
    if log_format == "json":
        short, full = (orjson.loads(line) for line in lines[:2])
        assert short["level"] == full["level"] == "CRITICAL"
        assert short["message"] == "pyarrow: Cannot parse URI: 's3://*****@b/p'"
        assert "exception" not in short and "Traceback" in full["exception"]
    else:
        assert lines[0] == lines[-1] and lines[1] == "Traceback (most recent call last):"
        assert lines[-2] == "RuntimeError: pyarrow: Cannot parse URI: 's3://*****@b/p'"
