"""A tick changes only the keys that have something due by it: which keys it changes never
depends on what the index of due keys named (it may name a key whose due moved later)."""

from __future__ import annotations

from datetime import timedelta

from framework import App, AppConfig, KeyTimers, Record, TestDriver, Timer
from framework.time.keeper import TimeKeeper
from framework.time.key_clock import TIME_STORE, KeyClock


def make_app() -> App:
    config = AppConfig.load(
        None,
        app_id="ticks",
        inputs=[{"topic": "in", "partitions": 1}],
        outputs=[{"topic": "out", "partitions": 1}],
        initial_processors=1,
    )
    app = App(config)

    @app.processor("in", stores=["alarm"])
    def arm(record: Record[bytes], alarm: KeyTimers) -> None:
        alarm.set_after(timedelta(seconds=10))

    @app.timer("alarm", stores=[])
    def ring(timer: Timer, state: object) -> None:
        return None

    return app


def test_a_key_named_with_nothing_due_by_the_tick_keeps_its_time() -> None:
    driver = TestDriver(make_app())
    driver.send("in", b"k", timestamp=1_000)  # its timer is due at 11 s
    batch = driver.database.begin()
    keeper = TimeKeeper({}, driver.app.timers, lambda spec, timer, batch: [])
    keeper.tick(batch, [b"k"], floor=5_000, wall=5_000)  # named, but nothing due by 5 s
    batch.commit()
    clock = KeyClock.decode(driver.state(TIME_STORE, b"k"))
    assert (clock.time, clock.floor) == (1_000, KeyClock().floor)


def test_the_driver_sends_a_timestamp_of_zero_as_zero() -> None:
    seen: list[int | None] = []
    app = make_app()
    app.handlers.clear()

    @app.processor("in", stores=[])
    def note(record: Record[bytes], state: object) -> None:
        seen.append(record.timestamp)

    TestDriver(app).send("in", b"k", timestamp=0)
    assert seen == [0]
