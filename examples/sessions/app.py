"""Session-timeout alerts with timers: tell when a user has been idle for 30 minutes.

Input topic ``clicks``: key = the user id, value = JSON ``{"page": "/cart"}`` (the Kafka
timestamp is the event time). Each click moves the user's ``idle`` timer to 30 minutes after
it. When the user's time (a later click, or a recorded tick of its partition) reaches the
timer, the timer function emits ``{"user", "clicks", "last_page", "idle_since"}`` to
``session-alerts`` and forgets the session. The session state also expires after a day by the
user's time (a TTL), should a timer never fire.

Run: splitstate run examples.sessions.app:app --all
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from framework import App, ExpiringState, KeyTimers, Output, Record, Timer

IDLE = timedelta(minutes=30)


class Click(BaseModel):
    """One page view."""

    page: str


app = App(config_file=Path(__file__).with_name("config.yaml"))
app.store("sessions", ttl=timedelta(days=1))


@app.processor("clicks", value_type=Click, stores=["sessions", "idle"])
def click(record: Record[Click], state: dict[str, Any]) -> None:
    """Count the click in the user's session and move its idle timer."""
    session: ExpiringState = state["sessions"]
    timers: KeyTimers = state["idle"]
    current = session.get() or {"clicks": 0}
    session.set({"clicks": current["clicks"] + 1, "last_page": record.value.page})
    timers.set_after(IDLE, name="idle")


@app.timer("idle", stores=["sessions"])
def idle(timer: Timer, session: ExpiringState) -> Output | None:
    """The user went quiet: emit the alert and end the session."""
    current = session.get()
    if current is None:
        return None
    session.delete()
    return Output(
        {
            "user": timer.key_text,
            "clicks": current["clicks"],
            "last_page": current["last_page"],
            "idle_since": timer.time - IDLE // timedelta(milliseconds=1),
        }
    )
