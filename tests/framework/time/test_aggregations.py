"""Every aggregation, in windows that only add (tumbling) and in windows that merge
(sessions), and a user ``Reduce`` with a typed accumulator."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from framework import Record
from framework.testing import TestDriver
from framework.time import (
    Aggregation,
    Collect,
    Count,
    Max,
    Mean,
    Min,
    Reduce,
    Session,
    Sliding,
    Sum,
    Tumbling,
)
from framework.time.windows import WindowKind
from tests.framework.time.apps import emitted, new_app


def results(kind: WindowKind, aggregation: Aggregation, *timed: tuple[int, Any]) -> list[Any]:
    """The final results of the key's windows of ``kind`` after ``timed`` records."""
    app = new_app()

    @app.window("in", kind, aggregation, value_type=dict)
    def values(record: Record[dict[str, Any]]) -> Any:
        return record.value["v"]

    driver = TestDriver(app)
    for at, value in timed:
        driver.send("in", b"k", {"v": value}, timestamp=at)
    driver.advance_time(10_000)
    assert driver.dead_letters == []
    return [value["value"] for _key, value in emitted(driver)]


SPLIT = ((1, 4), (2, 1.5), (3, 7), (20, 2))  # [0, 10) and [20, 30)
# sessions of gap 10 (grace keeps them open): [0, 0] and [15, 22], merged by the record at 8
MERGED = ((0, 4), (15, 1.5), (22, 7), (8, 2), (100, 5))


@pytest.mark.parametrize(
    ("aggregation", "tumbling", "sessions"),
    [
        (Count(), [3, 1], [4, 1]),
        (Sum(), [12.5, 2], [14.5, 5]),
        (Min(), [1.5, 2], [1.5, 5]),
        (Max(), [7, 2], [7, 5]),
        (Mean(), [12.5 / 3, 2.0], [14.5 / 4, 5.0]),
        (Collect(), [[4, 1.5, 7], [2]], [[4, 1.5, 7, 2], [5]]),
    ],
)
def test_aggregations(aggregation: Aggregation, tumbling: list[Any], sessions: list[Any]) -> None:
    assert results(Tumbling(10), aggregation, *SPLIT) == tumbling
    assert results(Session(10, grace=50), aggregation, *MERGED) == sessions


def test_aggregations_of_no_values() -> None:
    assert Mean().result(Mean().initial()) is None
    assert Min().result(Min().initial()) is None
    assert Max().merge(None, 3) == 3 and Max().merge(3, None) == 3
    assert Min().merge(None, None) is None
    assert Collect().merge([1], [2, 3]) == [1, 2, 3]


class Stats(BaseModel):
    """A typed accumulator."""

    count: int = 0
    total: float = 0
    names: list[str] = []


def add(stats: Stats, value: Any) -> Stats:
    return Stats(count=stats.count + 1, total=stats.total + value, names=[*stats.names, "x"])


def merge(first: Stats, second: Stats) -> Stats:
    return Stats(
        count=first.count + second.count,
        total=first.total + second.total,
        names=[*first.names, *second.names],
    )


def test_reduce_without_result_emits_the_accumulator_as_json() -> None:
    typed = Reduce(Stats, add, accumulator=Stats)
    assert results(Tumbling(10), typed, (1, 2), (2, 3)) == [
        {"count": 2, "total": 5, "names": ["x", "x"]}
    ]
    plain = Reduce(lambda: [0, 0], lambda acc, value: [acc[0] + value, max(acc[1], value)])
    assert results(Tumbling(10), plain, (1, 2), (2, 3)) == [[5, 3]]


@pytest.mark.parametrize("kind", [Session(10), Sliding(10)])
def test_a_reduce_without_merge_is_refused_where_windows_merge(kind: WindowKind) -> None:
    app = new_app()
    with pytest.raises(ValueError, match=r"no merge. Fix: Reduce\(..., merge=...\)"):
        app.windows_store("w", kind, Reduce(Stats, add))
    app.windows_store("fine", Tumbling(10), Reduce(Stats, add))
    with pytest.raises(TypeError, match="no merge"):
        Reduce(Stats, add).merge(Stats(), Stats())


def test_reduce_with_a_pydantic_accumulator_gets_models() -> None:
    def result(stats: Stats) -> dict[str, Any]:
        assert isinstance(stats, Stats)
        return {"mean": stats.total / stats.count, "n": stats.count}

    typed = Reduce(Stats, add, merge=merge, result=result, accumulator=Stats)
    assert results(Tumbling(10), typed, *SPLIT) == [{"mean": 12.5 / 3, "n": 3}, {"mean": 2, "n": 1}]
    assert results(Session(10, grace=50), typed, *MERGED) == [
        {"mean": 14.5 / 4, "n": 4},
        {"mean": 5, "n": 1},
    ]


def test_the_current_result_of_a_typed_reduce() -> None:
    app = new_app()
    typed = Reduce(Stats, add, result=lambda stats: stats.count, accumulator=Stats)

    @app.window("in", Tumbling(10), typed, value_type=dict, emit="current")
    def values(record: Record[dict[str, Any]]) -> Any:
        return record.value["v"]

    driver = TestDriver(app)
    driver.send("in", b"k", {"v": 1}, timestamp=1)
    driver.send("in", b"k", {"v": 1}, timestamp=2)
    assert driver.dead_letters == []
    assert [value["value"] for _key, value in emitted(driver)] == [1, 2]
