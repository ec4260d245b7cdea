"""The config's ``time:`` section (``framework.config_time``): defaults, the forms a duration
takes (file and environment), and errors that name the field and the fix."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from framework import AppConfig, ConfigError

BASE = """
app_id: demo
inputs: [{topic: events}]
initial_processors: 1
"""


def load(tmp_path: Path, extra: str = "") -> AppConfig:
    path = tmp_path / "c.yaml"
    path.write_text(BASE + extra)
    return AppConfig.load(path)


def test_defaults_a_tick_look_every_second_and_no_idle_floor(tmp_path: Path) -> None:
    config = load(tmp_path)
    assert config.time.tick_interval == timedelta(seconds=1)
    assert (config.time.tick_seconds, config.time.idle_after, config.time.idle_ms) == (
        1.0,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("0.25", 0.25), ("30", 30.0), ("PT5M", 300.0), ("'00:00:02'", 2.0)],
)
def test_seconds_or_an_iso_duration(tmp_path: Path, written: str, seconds: float) -> None:
    config = load(tmp_path, f"time: {{tick_interval: {written}, idle_after: {written}}}\n")
    assert config.time.tick_seconds == seconds
    assert config.time.idle_ms == int(seconds * 1000)


def test_the_environment_gives_seconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPLITSTATE_TIME__IDLE_AFTER", "2.5")
    monkeypatch.setenv("SPLITSTATE_TIME__TICK_INTERVAL", "PT0.5S")
    config = load(tmp_path)
    assert (config.time.idle_ms, config.time.tick_seconds) == (2500, 0.5)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("time: {tick_interval: 1s}", r"time\.tick_interval: '1s' is not a duration\. Fix: give"),
        ("time: {tick_interval: 0}", r"tick_interval must be at least 1 ms, got 0\.0 s\. Fix"),
        ("time: {idle_after: -5}", r"time\.idle_after: idle_after must be at least 1 ms"),
        ("time: {idle_after: true}", r"time\.idle_after: True is not a duration"),
        ("time: {tick: 1}", r"time\.tick: Extra inputs are not permitted"),
    ],
)
def test_errors_name_the_field_and_the_fix(tmp_path: Path, extra: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load(tmp_path, extra + "\n")


def test_a_bad_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPLITSTATE_TIME__TICK_INTERVAL", "soon")
    with pytest.raises(ConfigError, match="set by environment variable SPLITSTATE_TIME__TICK"):
        load(tmp_path)
