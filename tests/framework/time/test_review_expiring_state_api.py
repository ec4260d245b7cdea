"""Review: ``ExpiringState`` stands in for ``KeyState`` (a store declared with a ttl), but
lacked its ``store_name``: a function written against ``KeyState`` failed with an
``AttributeError`` once its store got a ttl."""

from __future__ import annotations

from framework import ExpiringState, Record
from framework.testing import TestDriver
from tests.framework.time.apps import new_app, stages


def test_an_expiring_state_has_the_key_states_names() -> None:
    app = new_app(partitions=1)
    app.store("seen", ttl=100)
    names: list[tuple[str, bytes]] = []

    @app.processor("in", stores=["seen"])
    def note(record: Record[bytes], seen: ExpiringState) -> None:
        names.append((seen.store_name, seen.key))

    driver = TestDriver(app)
    driver.send("in", b"k", timestamp=1)
    assert stages(driver) == []
    assert names == [("seen", b"k")]
