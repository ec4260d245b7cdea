"""A seeded scheduler of greenlets: the simulation's processes and its clock.

Each party of a simulated world (a processor, a producer, the operator, a lease renewer a
party started) runs its real, blocking code on a greenlet. It gives the scheduler control at
every Kafka call (``switch``) and every wait (``sleep`` through ``SimClock``); the scheduler
then picks, with its seeded ``random.Random``, which runnable party goes next. Time is
simulated: it moves a little with every call and jumps to the next wake-up when every party
waits. A killed party is never resumed again (its code stops between two calls, as a process
killed by the kernel), and neither are the parties it started.

Nothing here uses threads or real time: a seed gives the same interleaving every run.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import greenlet

__all__ = ["Killed", "Party", "Scheduler", "SimClock"]

#: Simulated seconds each switch costs (so loops that never sleep still see time move).
STEP_SECONDS = 0.001
#: The wall-clock time the simulation starts at (2026-01-01T00:00:00Z).
EPOCH = 1_767_225_600.0


class Killed(BaseException):
    """Raised inside a party the simulation killed (or that runs after the world ended)."""


@dataclass(eq=False)
class Party:
    """One simulated process (or a background task of one)."""

    name: str
    target: Callable[[], None]
    parent: Party | None = None
    wake_at: float = 0.0
    alive: bool = True
    finished: bool = False
    error: BaseException | None = None
    children: list[Party] = field(default_factory=list)
    glet: greenlet.greenlet | None = None
    #: called once when the party is killed (drop its clients, close its stores)
    on_kill: list[Callable[[], None]] = field(default_factory=list)

    @property
    def runnable(self) -> bool:
        """Alive and not finished."""
        return self.alive and not self.finished


class Scheduler:
    """Runs parties one at a time, in an order drawn from ``rng``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.now = 0.0
        self.steps = 0
        self.parties: list[Party] = []
        self.current: Party | None = None
        self.ended = False
        self.clock = SimClock(self)
        self._hub = greenlet.getcurrent()
        #: killed parties' greenlets, kept so they are not collected (and resumed) meanwhile
        self._graveyard: list[greenlet.greenlet] = []

    # -- parties -------------------------------------------------------------------------

    def spawn(self, name: str, target: Callable[[], None], parent: Party | None = None) -> Party:
        """A new party running ``target`` (a child of ``parent``: killed with it)."""
        party = Party(name, target, parent, wake_at=self.now)
        if parent is not None:
            parent.children.append(party)
        self.parties.append(party)
        return party

    def kill(self, party: Party) -> None:
        """Stop ``party`` (and its children) for good between two of its calls."""
        if not party.alive:
            return
        party.alive = False
        for child in party.children:
            self.kill(child)
        for action in party.on_kill:
            action()
        if party.glet is not None:
            self._graveyard.append(party.glet)

    def live(self) -> list[Party]:
        """Parties that may still run (the others are forgotten: a world with many restarts
        would scan every party it ever had at every step)."""
        self.parties = [p for p in self.parties if p.alive and not p.finished]  # runnable
        return list(self.parties)

    # -- inside a party ------------------------------------------------------------------

    def switch(self) -> None:
        """Give the scheduler control (a party calls this at every Kafka call)."""
        party = self.current
        if party is None:
            if self.ended:
                raise Killed("the simulated world has ended")
            self.now += STEP_SECONDS  # the driver itself: no one to switch to
            return
        self._hub.switch()
        if not party.alive or self.ended:
            raise Killed(party.name)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of simulated time."""
        party = self.current
        if party is None:
            if self.ended:
                raise Killed("the simulated world has ended")
            self.now += max(seconds, 0.0)
            return
        party.wake_at = self.now + max(seconds, 0.0)
        self.switch()

    # -- the loop ------------------------------------------------------------------------

    def step(self) -> Party | None:
        """Run one runnable party until its next switch; ``None`` when none is left."""
        live = self.parties = [p for p in self.parties if p.alive and not p.finished]
        if not live:
            return None
        now = self.now
        ready = [p for p in live if p.wake_at <= now]
        if not ready:
            self.now = now = min(p.wake_at for p in live)
            ready = [p for p in live if p.wake_at <= now]
        party = self.rng.choice(ready)
        self.steps += 1
        self.now += STEP_SECONDS
        self._resume(party)
        return party

    def run_until(self, done: Callable[[], bool], limit: int = 200_000) -> bool:
        """Step until ``done()`` (``True``) or ``limit`` steps ran (``False``); time moves on
        half a second whenever no party is left."""
        for _ in range(limit):
            if done():
                return True
            if self.step() is None:
                self.now += 0.5
        return False

    def _resume(self, party: Party) -> None:
        if party.glet is None:
            party.glet = greenlet.greenlet(self._body(party), parent=self._hub)
        self.current = party
        try:
            party.glet.switch()
        finally:
            self.current = None

    def _body(self, party: Party) -> Callable[[], None]:
        def run() -> None:
            try:
                party.target()
            except Killed:
                pass
            except BaseException as error:
                party.error = error
            party.finished = True

        return run

    def end(self) -> None:
        """End the world: every suspended party is dropped; its later calls raise ``Killed``."""
        self.ended = True
        for party in self.parties:
            if party.runnable:
                self.kill(party)
        for glet in self._graveyard:
            if not glet.dead:
                with contextlib.suppress(Killed):
                    glet.throw(Killed("the simulated world has ended"))
        self._graveyard.clear()


class SimClock:
    """The ``framework.clock.Clock`` of a simulated world: its scheduler's time."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def monotonic(self) -> float:
        """Simulated seconds since the world began."""
        return self._scheduler.now

    def time(self) -> float:
        """Simulated wall time."""
        return EPOCH + self._scheduler.now

    def sleep(self, seconds: float) -> None:
        """Let the other parties run for ``seconds`` of simulated time."""
        self._scheduler.sleep(seconds)

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """Sleep ``seconds`` of simulated time (as ``sleep``); then whether ``stop`` is set."""
        self._scheduler.sleep(seconds)
        return stop.is_set()

    def start(self, name: str, target: Callable[[], None]) -> _Party:
        """A new party, a child of the calling one (it dies with it)."""
        scheduler = self._scheduler
        parent = scheduler.current
        label = f"{parent.name}/{name}" if parent is not None else name
        return _Party(scheduler.spawn(label, target, parent))


class _Party:
    """A started party as a ``framework.clock.Task``: joining it does not wait (a stopped
    party returns at its next turn; waiting here would block the whole simulated world)."""

    def __init__(self, party: Party) -> None:
        self.party = party

    def join(self, timeout: float | None = None) -> None:
        """Return at once."""
