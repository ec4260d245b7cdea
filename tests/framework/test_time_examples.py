"""The time examples do what their docstrings say (broker-free, through TestDriver)."""

from __future__ import annotations

from datetime import timedelta

from examples.sensors.app import app as sensors
from examples.sessions.app import app as sessions
from framework import AppConfig, TestDriver

MINUTE = 60_000


def test_sensors_emit_each_minutes_mean_once_when_it_closes_and_dead_letter_late_readings() -> None:
    driver = TestDriver(sensors, AppConfig.load(sensors.config_file))
    for celsius, at in [(20.0, 1_000), (22.0, 59_000), (10.0, 5_000)]:
        driver.send("readings", b"s1", {"celsius": celsius, "at": at})
    driver.send("readings", b"s2", {"celsius": 5.0, "at": 2_000})
    assert driver.output_values() == []  # no minute closed: s1's time is 59 s
    driver.send("readings", b"s1", {"celsius": 30.0, "at": MINUTE + 10_000})  # 70 s: closes 0-60
    assert driver.output_values() == [{"start": 0, "end": MINUTE, "value": 52.0 / 3}]
    driver.send("readings", b"s1", {"celsius": 99.0, "at": 30_000})  # its minute closed
    assert [(d.stage, d.key) for d in driver.dead_letters] == [("late", b"s1")]
    assert "late by 40000 ms" in driver.dead_letters[0].reason
    driver.advance_time(3 * MINUTE)  # a tick on every partition: s2 is quiet but closes too
    assert sorted((o.key, o.value) for o in driver.outputs()[1:]) == [
        (b"s1", b'{"start":60000,"end":120000,"value":30.0}'),
        (b"s2", b'{"start":0,"end":60000,"value":5.0}'),
    ]
    driver.advance_time(10 * MINUTE)
    assert len(driver.outputs()) == 3, "each window once"


def test_sessions_alert_once_after_thirty_idle_minutes_and_a_click_moves_the_timer() -> None:
    idle = timedelta(minutes=30) // timedelta(milliseconds=1)
    driver = TestDriver(sessions, AppConfig.load(sessions.config_file))
    driver.send("clicks", b"ann", {"page": "/"}, timestamp=1_000)
    driver.send("clicks", b"ann", {"page": "/cart"}, timestamp=MINUTE)
    driver.advance_time(1_000 + idle)  # the first click's timer was moved by the second
    assert driver.output_values() == []
    driver.advance_time(MINUTE + idle)
    assert driver.output_values() == [
        {"user": "ann", "clicks": 2, "last_page": "/cart", "idle_since": MINUTE}
    ]
    assert driver.state("sessions", b"ann") is None
    driver.advance_time(MINUTE + 2 * idle)
    assert len(driver.output_values()) == 1, "once"
