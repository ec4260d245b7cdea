"""A session-timeout alert: each key's events are counted, and once the key has been quiet
for ``GAP_MS`` of recorded processing time (ticks) one alert ``{"alert": key, "events": n}``
is emitted and the count starts over. Beside it, an event-time session window of the same gap
counts the events of each session and emits ``{"start", "end", "value"}`` when the key's time
(its records', or the floor of a tick) passes its end: with ``time.idle_after`` set, the
ticks of a quiet partition close it.

Used by the runtime's tick tests (``tests/integration/test_ticks*.py``)."""

from __future__ import annotations

from typing import Any

from framework import App, Output, Record
from framework.time import Count, KeyTimers, Session, Timer
from statestore import KeyState

#: how long a key must be quiet before its alert, and its session window's gap (ms)
GAP_MS = 1500
#: the key whose alert fails
FAILING = b"boom"

app = App()
app.store("events", int)
app.windows_store("sessions", Session(gap=GAP_MS), Count())


@app.timer("quiet", stores=["events"])
def alert(timer: Timer, events: KeyState[int]) -> Output:
    """The key went quiet: one alert with its events since the last one (key ``boom``: the
    timer function fails, a dead letter of stage ``timer``)."""
    if timer.key == FAILING:
        raise ValueError("no alert for this key")
    count = events.get(0)
    events.delete()
    return Output({"alert": timer.key_text, "events": count})


@app.processor(stores=["events", "sessions", "quiet"])
def event(record: Record[bytes], stores: dict[str, Any]) -> None:
    """Count the event, add it to the key's session, and (re)arm its quiet timer."""
    events: KeyState[int] = stores["events"]
    events.set(events.get(0) + 1)
    stores["sessions"].add(1)
    timers: KeyTimers = stores["quiet"]
    timers.set_wall_after(GAP_MS, "quiet")
