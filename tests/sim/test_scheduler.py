"""The simulation's scheduler: seeded interleavings, simulated time, kills."""

from __future__ import annotations

import random

from tests.sim.scheduler import Scheduler


def _trace(seed: int) -> list[str]:
    scheduler = Scheduler(random.Random(seed))
    trace: list[str] = []

    def worker(name: str) -> None:
        for i in range(5):
            trace.append(f"{name}{i}")
            scheduler.switch()

    for name in "abc":
        scheduler.spawn(name, lambda name=name: worker(name))  # type: ignore[misc]
    while scheduler.step() is not None:
        pass
    return trace


def test_a_seed_gives_the_same_interleaving_and_seeds_differ() -> None:
    assert _trace(1) == _trace(1)
    assert len({tuple(_trace(seed)) for seed in range(10)}) > 1
    assert sorted(_trace(3)) == sorted(f"{n}{i}" for n in "abc" for i in range(5))


def test_sleep_moves_simulated_time_and_others_run_meanwhile() -> None:
    scheduler = Scheduler(random.Random(0))
    seen: list[tuple[str, float]] = []

    def sleeper() -> None:
        scheduler.clock.sleep(10.0)
        seen.append(("woke", scheduler.clock.monotonic()))

    def busy() -> None:
        for _ in range(3):
            seen.append(("busy", scheduler.clock.monotonic()))
            scheduler.switch()

    scheduler.spawn("sleeper", sleeper)
    scheduler.spawn("busy", busy)
    while scheduler.step() is not None:
        pass
    assert [what for what, _ in seen].count("busy") == 3
    assert seen[-1][0] == "woke" and seen[-1][1] >= 10.0
    assert all(at < 10.0 for what, at in seen if what == "busy")


def test_a_killed_party_and_its_children_never_run_again() -> None:
    scheduler = Scheduler(random.Random(0))
    ran: list[str] = []

    def child() -> None:
        while True:
            ran.append("child")
            scheduler.clock.sleep(1.0)

    def parent() -> None:
        scheduler.clock.start("renew", child)
        while True:
            ran.append("parent")
            scheduler.switch()

    party = scheduler.spawn("parent", parent)
    for _ in range(20):
        scheduler.step()
    assert "child" in ran and "parent" in ran
    scheduler.kill(party)
    before = len(ran)
    assert scheduler.step() is None  # nothing left to run
    assert len(ran) == before
    assert not party.children[0].alive
    scheduler.end()
