"""The examples and the processing rules, through the broker-free test driver."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from examples.balances.app import Balance
from examples.balances.app import app as balances_app
from examples.wordcount.app import app as wordcount_app
from framework import App, AppConfig, ConfigError, Output, Record
from framework.processing import ProcessorStoppedError
from framework.testing import TestDriver
from statestore import KeyState


def config(**overrides: object) -> AppConfig:
    base: dict[str, object] = {
        "app_id": "unit",
        "inputs": [{"topic": "in", "partitions": 4}],
        "outputs": [{"topic": "out", "partitions": 4}],
        "initial_processors": 2,
    }
    base.update(overrides)
    return AppConfig.load(None, **base)


def test_wordcount_counts_per_word() -> None:
    driver = TestDriver(wordcount_app, AppConfig.load(wordcount_app.config_file))
    for word in ["apple", "pear", "apple", "apple"]:
        driver.send("words", word.encode())
    assert driver.output_values("word-counts") == [
        {"word": "apple", "count": 1},
        {"word": "pear", "count": 1},
        {"word": "apple", "count": 2},
        {"word": "apple", "count": 3},
    ]
    assert [o.key for o in driver.outputs()] == [b"apple", b"pear", b"apple", b"apple"]
    assert driver.state("counts", b"apple") == 3
    assert sum(driver.offsets().values()) == 4


@pytest.fixture
def balances() -> Iterator[TestDriver]:
    yield TestDriver(balances_app, AppConfig.load(balances_app.config_file))


def tx(account: str, kind: str, amount: int) -> str:
    return json.dumps({"account": account, "kind": kind, "amount": amount})


def test_balances_apply_typed_records(balances: TestDriver) -> None:
    balances.send("transactions", b"acc-1", tx("acc-1", "deposit", 500))
    balances.send("transactions", b"acc-1", tx("acc-1", "withdrawal", 200))
    assert balances.state("accounts", b"acc-1") == Balance(
        account="acc-1", balance=300, transactions=2
    )
    assert balances.output_values()[-1] == {"account": "acc-1", "balance": 300, "transactions": 2}
    assert balances.dead_letters == []


def test_a_failing_function_raises_in_a_test_by_default(balances: TestDriver) -> None:
    balances.send("transactions", b"acc-1", tx("acc-1", "deposit", 100))
    with pytest.raises(Exception, match="exceeds the balance") as failed:
        balances.send("transactions", b"acc-1", tx("acc-1", "withdrawal", 1000))
    assert type(failed.value).__name__ == "InsufficientFundsError"  # the function's own
    assert any("on_error='dead-letter'" in note for note in failed.value.__notes__)
    # Nothing of the failed record was kept: state, offsets and outputs are as before it.
    assert balances.state("accounts", b"acc-1") == Balance(
        account="acc-1", balance=100, transactions=1
    )
    assert balances.offsets() == {("transactions", 2): 1}
    assert balances.dead_letters == []
    # Records the app cannot take are dead letters all the same, not errors.
    balances.send("transactions", b"acc-1", "{not json")
    assert [d.stage for d in balances.dead_letters] == ["decode"]


def test_a_function_returning_a_dict_fails_the_test() -> None:
    """The bug a new user met: a function returning a dict dead-lettered every record while the
    driver's tests passed. Now the test fails, with the function's own exception and cause."""
    app = App(config())
    app.store("s")

    @app.processor()
    def bare(record: Record[bytes], state: KeyState[int]) -> Any:
        return {"word": "apple"}

    with pytest.raises(TypeError, match="returned a dict, not an Output"):
        TestDriver(app).send("in", b"k")

    chained = App(config())
    chained.store("s")

    @chained.processor()
    def looks_up(record: Record[bytes], state: KeyState[int]) -> Any:
        table: dict[str, int] = {}
        try:
            return table["missing"]
        except KeyError as missing:
            raise ValueError("lookup failed") from missing

    with pytest.raises(ValueError, match="lookup failed") as failed:
        TestDriver(chained).send("in", b"k")
    assert isinstance(failed.value.__cause__, KeyError)  # the user's own chain, whole


def test_outputs_of_a_topic_the_app_does_not_write_is_an_error(balances: TestDriver) -> None:
    with pytest.raises(ValueError, match="writes no topic 'balance-update'"):
        balances.outputs("balance-update")


def test_bad_records_become_dead_letters_with_reasons() -> None:
    balances = TestDriver(
        balances_app, AppConfig.load(balances_app.config_file), on_error="dead-letter"
    )
    balances.send("transactions", b"acc-1", tx("acc-1", "deposit", 100))
    balances.send("transactions", b"acc-1", "{not json")
    balances.send("transactions", b"acc-1", tx("acc-1", "deposit", -5))
    balances.send("transactions", b"acc-1", tx("acc-1", "withdrawal", 1000))
    balances.send("transactions", None, tx("acc-1", "deposit", 1))
    balances.send("transactions", b"acc-1", tx("acc-1", "deposit", 1))
    reasons = [(d.stage, d.reason) for d in balances.dead_letters]
    assert len(reasons) == 4
    assert reasons[0][0] == "decode" and "Invalid JSON" in reasons[0][1]
    assert reasons[1][0] == "decode" and "greater than 0" in reasons[1][1]
    assert reasons[2][0] == "processor" and "InsufficientFundsError" in reasons[2][1]
    assert reasons[3][0] == "decode" and "no key" in reasons[3][1]
    headers = dict(balances.dead_letters[0].kafka_headers())
    assert headers["splitstate.stage"] == b"decode"
    assert headers["splitstate.offset"] == b"1"
    assert balances.dead_letters[0].value == b"{not json"
    # Processing went on; the failed withdrawal changed nothing.
    assert balances.state("accounts", b"acc-1") == Balance(
        account="acc-1", balance=101, transactions=2
    )


def test_failed_record_state_writes_are_rolled_back() -> None:
    app = App(config())
    app.store("s")

    @app.processor()
    def half_then_fail(record: Record[bytes], state: KeyState[int]) -> None:
        state.set((state.get() or 0) + 1)
        if record.value == b"boom":
            raise RuntimeError("after writing state")

    driver = TestDriver(app, on_error="dead-letter")
    driver.send("in", b"k", b"ok")
    driver.send("in", b"k", b"boom")
    driver.send("in", b"k", b"ok")
    assert driver.state("s", b"k") == 2
    assert "RuntimeError: after writing state" in driver.dead_letters[0].reason


def test_stop_policy_names_the_record() -> None:
    app = App(config(on_error="stop"))
    app.store("s")

    @app.processor()
    def fail(record: Record[bytes], state: KeyState[int]) -> None:
        raise KeyError("nope")

    driver = TestDriver(app)
    with pytest.raises(ProcessorStoppedError, match=r"failed on in\[\d\]@0 \(key b'k'\)"):
        driver.send("in", b"k")
    assert driver.offsets() == {}


def test_outputs_to_undeclared_topics_are_dead_letters() -> None:
    app = App(config())
    app.store("s")

    @app.processor()
    def wrong(record: Record[bytes], state: KeyState[int]) -> Output:
        return Output(1, topic="elsewhere")

    driver = TestDriver(app, on_error="dead-letter")
    driver.send("in", b"k")
    assert "output topic 'elsewhere' is not declared" in driver.dead_letters[0].reason


def test_several_stores_and_topics() -> None:
    app = App(
        config(
            inputs=[{"topic": "a", "partitions": 2}, {"topic": "b", "partitions": 2}],
            outputs=[{"topic": "x"}, {"topic": "y"}],
        )
    )
    app.store("seen")
    app.store("last", str)

    @app.processor("a", value_type=str)
    def on_a(record: Record[str], state: dict[str, KeyState[object]]) -> list[Output]:
        state["seen"].set((state["seen"].get() or 0) + 1)
        state["last"].set(record.value)
        return [Output(record.value, topic="x"), Output(record.value.upper(), topic="y")]

    @app.processor("b", stores=["seen"])
    def on_b(record: Record[bytes], state: KeyState[int]) -> None:
        state.set((state.get() or 0) + 10)

    driver = TestDriver(app)
    driver.send("a", b"k", "hi")
    driver.send("b", b"k")
    assert driver.state("seen", b"k") == 11
    assert driver.state("last", b"k") == "hi"
    assert [o.value for o in driver.outputs("y")] == [b"HI"]


def test_app_and_config_must_agree() -> None:
    app = App(config(inputs=[{"topic": "in"}, {"topic": "other"}]))

    @app.processor("in")
    def only_in(record: Record[bytes], state: object) -> None:
        return None

    with pytest.raises(
        ConfigError, match=r"input topics without a processor function: \['other'\]"
    ):
        app.check()
    with pytest.raises(ValueError, match="already registered"):
        app.processor("in")(only_in)


class Click(BaseModel):
    user: str
    page: str


def clicks_app() -> App:
    """Counts clicks per user from pydantic ``Click`` values."""
    app = App(config(inputs=[{"topic": "clicks", "partitions": 2}], initial_processors=1))
    app.store("clicks")

    @app.processor("clicks", value_type=Click)
    def count(record: Record[Click], state: KeyState[int]) -> Output:
        state.set((state.get() or 0) + 1)
        return Output({"user": record.value.user, "clicks": state.get()})

    return app


def test_send_encodes_a_dict_a_model_or_text_as_a_producer_would() -> None:
    """A dict or model sent to an app of pydantic values is JSON, not a decode dead letter."""
    app = clicks_app()
    driver = TestDriver(app, app.config)
    driver.send("clicks", b"u1", {"user": "u1", "page": "/a"})
    driver.send("clicks", b"u1", Click(user="u1", page="/b"))
    driver.send("clicks", b"u1", '{"user": "u1", "page": "/c"}')
    assert driver.dead_letters == []
    assert driver.output_values("out") == [
        {"user": "u1", "clicks": 1},
        {"user": "u1", "clicks": 2},
        {"user": "u1", "clicks": 3},
    ]


def test_send_refuses_a_value_it_cannot_encode_naming_the_fix() -> None:
    app = clicks_app()
    driver = TestDriver(app, app.config)
    with pytest.raises(TypeError, match=r"TestDriver\.send to 'clicks': a value of type object"):
        driver.send("clicks", b"u1", object())
    assert driver.outputs("out") == [] and sum(driver.offsets().values()) == 0


@pytest.mark.parametrize(
    ("returned", "named"),
    [
        ({"word": "apple"}, "a dict"),
        ("apple", "a str"),
        (b"apple", "a bytes"),
        (3, "an int"),
        ([Output(1), {"word": "apple"}], "an item that is a dict"),
    ],
)
def test_returning_a_value_instead_of_an_output_names_the_fix(returned: object, named: str) -> None:
    """A function that returns its value bare (a dict, text) was iterated and its first item
    named ("got str"): the dead letter now says what it returned and to wrap it in Output."""
    app = App(config())
    app.store("s")

    @app.processor()
    def bare(record: Record[bytes], state: KeyState[int]) -> Any:
        state.set(1)
        return returned

    driver = TestDriver(app, on_error="dead-letter")
    driver.send("in", b"k")
    [dead] = driver.dead_letters
    assert dead.stage == "processor"
    assert f"the processor function bare returned {named}, not an Output" in dead.reason
    assert "Fix: return Output(value)" in dead.reason, dead.reason
    assert driver.state("s", b"k") is None  # rolled back, as for any failure
