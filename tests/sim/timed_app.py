"""The simulated app's time (a plan with ``timed``): windows, timers and a ttl per key.

Besides the fold (``tests/sim/app.py``, its outputs to ``OUTPUT``), the function of a timed
app, for each record of ``"<producer>:<seq>"`` at its timestamp (``tests/sim/event_times.py``):

- reads the key's ``recent`` value (a store whose values expire ``TTL_MS`` after they were
  set, by the key's time), then sets it to ``"<producer>:<seq>"``; it says what it read:
  ``["ttl", producer, seq, previous]``;
- adds ``seq`` to the key's tumbling window sums (``WINDOW_MS``, grace ``GRACE_MS``) and
  ``"<producer>:<seq>"`` to its sessions (``Collect``: in the key's record order; gap
  ``GAP_MS``). Each window emits ``["window", store, start, end, result]`` once, when it
  closes; a record whose window closed already is late: ``["late", store, producer, seq,
  ms late]`` (the store's ``on_late``: the record is still applied);
- sets the key's event-time timer ``quiet`` ``QUIET_MS`` after its time, and its
  processing-time timer ``idle`` ``IDLE_MS`` after its processing time (moved by ticks
  only). A timer emits ``["timer", name, due, key time, processing time, records folded,
  recent value]`` when it fires: a key that went quiet.

Everything goes to topic ``TIMED``, keyed by the record key; the checks compare it with a
single-processor oracle over the input (``tests/sim/time_oracle.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from framework import App, Output, Record
from framework.time import Collect, LateError, Session, Sum, Timer, Tumbling, WindowResult

__all__ = [
    "GAP_MS",
    "GRACE_MS",
    "IDLE_MS",
    "QUIET_MS",
    "TIMED",
    "TTL_MS",
    "WINDOW_MS",
    "add_time",
]

#: the topic of window results, timer outputs and the function's notes
TIMED = "sim-time"
WINDOW_MS = 2_000
GRACE_MS = 500
GAP_MS = 1_500
QUIET_MS = 3_000
IDLE_MS = 5_000
TTL_MS = 2_500

#: the fold of ``tests/sim/app.py``: ``(record, its key's state) -> output``
Fold = Callable[[Record[bytes | None], Any], Output | None]


def add_time(app: App, fold: Fold) -> None:
    """Declare the time stores on ``app`` and its function: ``fold``, then time (see the
    module)."""
    app.store("recent", ttl=TTL_MS)
    app.windows_store(
        "sums",
        Tumbling(WINDOW_MS, grace=GRACE_MS),
        Sum(),
        to=TIMED,
        result=_result("sums"),
        on_late=_late("sums"),
    )
    app.windows_store(
        "sessions",
        Session(GAP_MS),
        Collect(),
        to=TIMED,
        result=_result("sessions"),
        on_late=_late("sessions"),
    )

    @app.timer("quiet", stores=["folds", "recent"])
    def quiet(timer: Timer, stores: dict[str, Any]) -> Output:
        """Say that the key went quiet, with what it holds now."""
        held = stores["folds"].get()
        n = None if held is None else held["n"]
        value = ["timer", timer.name, timer.time, timer.key_time, timer.wall, n]
        return Output([*value, stores["recent"].get()], topic=TIMED)

    @app.processor(stores=["folds", "recent", "sums", "sessions", "quiet"])
    def fold_in_time(record: Record[bytes | None], stores: dict[str, Any]) -> list[Output]:
        """Fold the record, then keep its key's time (see the module)."""
        said = fold(record, stores["folds"])
        producer, seq = named(record)
        recent = stores["recent"]
        previous = recent.get()
        recent.set(f"{producer}:{seq}")
        stores["sums"].add(seq)
        stores["sessions"].add(f"{producer}:{seq}")
        timers = stores["quiet"]
        timers.set_after(QUIET_MS, "quiet")
        timers.set_wall_after(IDLE_MS, "idle")
        note = Output(["ttl", producer, seq, previous], topic=TIMED)
        return [note] if said is None else [said, note]


def named(record: Record[bytes | None]) -> tuple[str, int]:
    """``(producer, seq)`` of a record's value ``"<producer>:<seq>[:<kind>]"``."""
    producer, seq = (record.value or b"").decode().split(":")[:2]
    return producer, int(seq)


def _result(store: str) -> Callable[[WindowResult], list[Any]]:
    def result(window: WindowResult) -> list[Any]:
        return ["window", store, window.start, window.end, window.value]

    return result


def _late(store: str) -> Callable[[Record[bytes | None], LateError], Output]:
    def late(record: Record[bytes | None], error: LateError) -> Output:
        producer, seq = named(record)
        return Output(["late", store, producer, seq, error.by], topic=TIMED)

    return late
