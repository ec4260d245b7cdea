"""An output's key is the one given, even an empty one; without one it is the record's."""

from __future__ import annotations

from framework import App, AppConfig, Output, Record
from framework.testing import TestDriver
from statestore import KeyState


def test_an_empty_output_key_is_kept_and_a_missing_one_is_the_records() -> None:
    config = AppConfig.model_validate(
        {
            "app_id": "keys",
            "inputs": [{"topic": "in", "partitions": 1}],
            "outputs": [{"topic": "out", "partitions": 1}],
            "initial_processors": 1,
        }
    )
    app = App(config)
    app.store("seen")

    @app.processor()
    def emit(record: Record[bytes | None], state: KeyState[int]) -> Output:
        return Output(record.value, key=b"" if record.value == b"empty" else None)

    driver = TestDriver(app)
    driver.send("in", b"apple", b"empty")
    driver.send("in", b"apple", b"own")
    assert [o.key for o in driver.outputs("out")] == [b"", b"apple"]
