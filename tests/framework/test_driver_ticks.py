"""``TestDriver.tick``: a tick on one partition reaches only the keys living there (and, given
``keys``, only those it accepts), as the runtime applies a tick read there."""

from __future__ import annotations

from pathlib import Path

from framework import TestDriver
from tests.framework.time_world import OUT, TOPIC, keys_in, window_app


def test_a_tick_on_one_partition_closes_only_the_windows_of_its_keys(tmp_path: Path) -> None:
    driver = TestDriver(window_app(tmp_path, partitions=2, initial=1))
    first, second = keys_in(0, 2, 2, 2)
    other = keys_in(1, 2, 2, 1)[0]
    for key, value in ((first, 1), (second, 2), (other, 3)):
        driver.send(TOPIC, key, value, timestamp=1_000)
    driver.tick(TOPIC, 1, 20_000)
    assert [(o.key, o.value) for o in driver.outputs(OUT)] == [
        (other, b'{"start":0,"end":10000,"value":3.0}')
    ]
    driver.tick(TOPIC, 0, 20_000, keys=lambda key: key == second)
    assert [o.key for o in driver.outputs(OUT)] == [other, second]
    assert driver.offsets() == {(TOPIC, 0): 3, (TOPIC, 1): 2}  # each tick at its next offset
    driver.advance_time(30_000)  # every partition: the first key's window closes now
    assert [o.key for o in driver.outputs(OUT)] == [other, second, first]
