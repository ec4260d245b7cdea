"""Which keys a tick takes (``Homes.takes_tick``) over random histories of growths, shrinks
and regrowths (``tests/rebalance/history_world``): by the steps its writer knew, the same for
every reader whose view holds those steps (unless the reader lacks a step that moved keys
away at a marker before the tick: it met that marker, and reads the registry again), only
keys that live there by the whole history, and all of those when the writer knew every
step. Checked against the simulation oracle's own reckoning (``tick_takes``)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.growth.late import Homes
from rebalance import TopicHistory
from tests.rebalance.history_world import World
from tests.sim.time_oracle import tick_takes


@st.composite
def _worlds(draw: st.DrawFn) -> World:
    n = draw(st.sampled_from([1, 2, 4]))
    counts = [n]
    for _ in range(draw(st.integers(1, 4))):
        count = draw(st.integers(n, 4 * n))
        counts.append(count if count != counts[-1] else (n if count != n else 4 * n))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    return World(n, counts, rng, list(range(32)), writes=8)


def _view(history: TopicHistory, steps: int) -> TopicHistory:
    """``history`` as a registry read after its first ``steps`` steps were recorded."""
    return TopicHistory(history.name, history.counts[: steps + 1], history.steps[:steps])


def _met_away(history: TopicHistory, known: int, partition: int, offset: int) -> bool:
    """Whether a step after the first ``known`` moved keys away from ``partition`` at a
    marker there at or before ``offset`` (a reader that met it reads the registry again)."""
    return any(
        b.step > known and b.offset <= offset and b.kind in ("marker", "drain")
        for b in history.boundaries(partition)
    )


@settings(max_examples=40, deadline=None)
@given(_worlds())
def test_a_tick_takes_the_same_keys_whatever_view_of_the_registry_judges_it(world: World) -> None:
    history = world.history
    full = Homes(history)
    last = len(history.steps)
    views = {known: Homes(_view(history, known)) for known in range(last + 1)}
    for partition in range(history.created):
        for offset in range(len(world.logs[partition]) + 2):
            for h in world.keys:
                home = history.home_at(h, partition, offset) == partition
                assert full.takes_tick(h, partition, offset, None) == home
                assert full.takes_tick(h, partition, offset, last) == home
                for steps in range(last + 1):
                    takes = full.takes_tick(h, partition, offset, steps)
                    where = (partition, offset)
                    assert takes == tick_takes(history, h, where, steps), (steps, where, h)
                    assert home or not takes, (steps, where, h)
                    for known in range(steps, last + 1):
                        if not _met_away(history, known, partition, offset):
                            judged = views[known].takes_tick(h, partition, offset, steps)
                            assert judged == takes, (steps, known, where, h)
