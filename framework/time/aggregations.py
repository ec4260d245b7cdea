"""What a window computes of its records: an accumulator kept in the key's state.

An aggregation starts from ``initial()``, takes each value with ``add``, combines two
accumulators with ``merge`` (session windows merging, sliding windows), and gives the window's
result with ``result``. Accumulators are stored as JSON, so they must be JSON-able (or, with
``Reduce(accumulator=...)``, a type pydantic can dump and validate); a record that would make
one hold a NaN or infinite float is refused (``KeyWindows.add``: JSON has neither). Values are
added in the key's record order, which is the same on every replay: a sum of floats adds up
the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from pydantic import TypeAdapter

__all__ = [
    "Aggregation",
    "Collect",
    "Count",
    "Max",
    "Mean",
    "Min",
    "Reduce",
    "Sum",
]

A = TypeVar("A")


class Aggregation(Protocol):
    """How a window turns the values added to it into a result."""

    #: short name, in errors and ``state dump``
    name: str

    def initial(self) -> Any:
        """The accumulator of an empty window."""
        ...

    def add(self, accumulator: Any, value: Any) -> Any:
        """The accumulator after ``value`` was added."""
        ...

    def merge(self, first: Any, second: Any) -> Any:
        """The accumulator of both windows' values (``first``'s before ``second``'s)."""
        ...

    def result(self, accumulator: Any) -> Any:
        """The window's result."""
        ...

    def dump(self, accumulator: Any) -> Any:
        """The accumulator as JSON-able data."""
        ...

    def load(self, data: Any) -> Any:
        """The accumulator ``dump`` gave ``data`` for."""
        ...


class _Plain:
    """Accumulators that are JSON values as they are."""

    name = "plain"

    def dump(self, accumulator: Any) -> Any:
        """As it is."""
        return accumulator

    def load(self, data: Any) -> Any:
        """As it is."""
        return data


class Count(_Plain):
    """How many values the window holds."""

    name = "count"

    def initial(self) -> int:
        """0."""
        return 0

    def add(self, accumulator: int, value: Any) -> int:
        """One more."""
        return accumulator + 1

    def merge(self, first: int, second: int) -> int:
        """Both counts."""
        return first + second

    def result(self, accumulator: int) -> int:
        """The count."""
        return accumulator


class Sum(_Plain):
    """The sum of the values (numbers)."""

    name = "sum"

    def initial(self) -> float:
        """0."""
        return 0

    def add(self, accumulator: float, value: float) -> float:
        """Plus ``value``."""
        return accumulator + value

    def merge(self, first: float, second: float) -> float:
        """Both sums."""
        return first + second

    def result(self, accumulator: float) -> float:
        """The sum."""
        return accumulator


class Min(_Plain):
    """The smallest value (``None`` for none)."""

    name = "min"

    def initial(self) -> Any:
        """None."""
        return None

    def add(self, accumulator: Any, value: Any) -> Any:
        """The smaller."""
        return value if accumulator is None or value < accumulator else accumulator

    def merge(self, first: Any, second: Any) -> Any:
        """The smaller of both."""
        return second if first is None else self.add(first, second) if second is not None else first

    def result(self, accumulator: Any) -> Any:
        """The minimum."""
        return accumulator


class Max(_Plain):
    """The largest value (``None`` for none)."""

    name = "max"

    def initial(self) -> Any:
        """None."""
        return None

    def add(self, accumulator: Any, value: Any) -> Any:
        """The larger."""
        return value if accumulator is None or value > accumulator else accumulator

    def merge(self, first: Any, second: Any) -> Any:
        """The larger of both."""
        return second if first is None else self.add(first, second) if second is not None else first

    def result(self, accumulator: Any) -> Any:
        """The maximum."""
        return accumulator


class Mean(_Plain):
    """The arithmetic mean of the values (``None`` for none); kept as ``[sum, count]``."""

    name = "mean"

    def initial(self) -> list[float]:
        """No values."""
        return [0, 0]

    def add(self, accumulator: list[float], value: float) -> list[float]:
        """With ``value``."""
        return [accumulator[0] + value, accumulator[1] + 1]

    def merge(self, first: list[float], second: list[float]) -> list[float]:
        """Both windows' values."""
        return [first[0] + second[0], first[1] + second[1]]

    def result(self, accumulator: list[float]) -> float | None:
        """The mean."""
        total, count = accumulator
        return total / count if count else None


class Collect(_Plain):
    """Every value, in the key's record order."""

    name = "collect"

    def initial(self) -> list[Any]:
        """No values."""
        return []

    def add(self, accumulator: list[Any], value: Any) -> list[Any]:
        """With ``value`` at the end."""
        return [*accumulator, value]

    def merge(self, first: list[Any], second: list[Any]) -> list[Any]:
        """``first``'s values, then ``second``'s."""
        return [*first, *second]

    def result(self, accumulator: list[Any]) -> list[Any]:
        """The values."""
        return accumulator


class Reduce(Generic[A]):
    """A user aggregation: ``add(accumulator, value)`` from ``initial``; ``merge`` (needed by
    session and sliding windows) combines two accumulators; ``result`` gives the window's
    result from its accumulator (default: the accumulator as JSON-able data).
    ``accumulator``: its type, when it is not plain JSON (a pydantic model, a dataclass):
    stored through pydantic, and given to ``add``, ``merge`` and ``result`` as that type."""

    name = "reduce"

    def __init__(
        self,
        initial: Callable[[], A],
        add: Callable[[A, Any], A],
        *,
        merge: Callable[[A, A], A] | None = None,
        result: Callable[[A], Any] | None = None,
        accumulator: type[A] | None = None,
    ) -> None:
        self._initial = initial
        self._add = add
        self._merge = merge
        self._result = result
        self._adapter: TypeAdapter[A] | None = (
            None if accumulator is None else TypeAdapter(accumulator)
        )

    @property
    def merges(self) -> bool:
        """Whether it was given a ``merge``."""
        return self._merge is not None

    def initial(self) -> A:
        """A new accumulator."""
        return self._initial()

    def add(self, accumulator: A, value: Any) -> A:
        """The user's ``add``."""
        return self._add(accumulator, value)

    def merge(self, first: A, second: A) -> A:
        """The user's ``merge``."""
        if self._merge is None:
            raise TypeError("this Reduce has no merge; session and sliding windows need one")
        return self._merge(first, second)

    def result(self, accumulator: A) -> Any:
        """The user's ``result``, or the accumulator as JSON-able data (``dump``)."""
        return self.dump(accumulator) if self._result is None else self._result(accumulator)

    def dump(self, accumulator: A) -> Any:
        """JSON-able data of the accumulator."""
        if self._adapter is None:
            return accumulator
        return self._adapter.dump_python(accumulator, mode="json")

    def load(self, data: Any) -> A:
        """The accumulator of ``data``."""
        if self._adapter is None:
            return data  # type: ignore[no-any-return]
        return self._adapter.validate_python(data)
