"""Review (time, 2): what asking the due index costs.

A processor asks ``DueIndex.due`` for every input partition it considers ticking, every
``tick_interval``, and again for every tick it reads (``StateBatch.due_keys``). Most keys of a
windowed app have something due (their open windows' ends), and nearly none of it is due now:
the answer must cost what is due, not every key the processor holds. (Was: each call read
every entry, ~0.14 s for a million keys, so a processor with a million windowed keys and a
handful of partitions spent more than its whole time deciding and reading ticks.)
"""

from __future__ import annotations

import random
import time
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from statestore import due_index
from statestore.due_index import NEVER, DueIndex, encode_due

KEYS = 300_000


def test_asking_for_what_is_due_costs_what_is_due_not_every_key() -> None:
    stored = [(b"key-%07d" % i, encode_due(10_000_000 + i, NEVER)) for i in range(KEYS)]
    index = DueIndex(lambda: iter(stored))
    assert index.due(10_000_001, 0) == [b"key-0000000", b"key-0000001"]  # (loaded)
    began = time.perf_counter()
    for _ in range(20):
        assert index.due(5_000_000, 5_000_000) == []
    assert (time.perf_counter() - began) / 20 < 0.002


keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e"])
dues = st.one_of(
    st.none(),
    st.tuples(st.sampled_from([0, 5, 10, NEVER]), st.sampled_from([0, 5, 10, NEVER])),
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.lists(st.tuples(keys, dues), max_size=4)),
        st.tuples(st.just("ask"), st.sampled_from([-1, 0, 5, 10, NEVER - 1, NEVER])),
        st.tuples(st.just("invalidate")),
    ),
    max_size=40,
)


@settings(max_examples=300)
@given(steps=steps, seed=st.integers(0, 1000), slack=st.sampled_from([0, 1024]))
def test_the_index_answers_as_reading_every_entry_does(
    steps: list[tuple[object, ...]], seed: int, slack: int
) -> None:
    """(``slack`` 0: its heaps are rebuilt as soon as a stale item outnumbers the entries.)"""
    saved, due_index._SLACK = due_index._SLACK, slack
    try:
        _answers_as_a_scan(steps, seed)
    finally:
        due_index._SLACK = saved


def _answers_as_a_scan(steps: list[tuple[object, ...]], seed: int) -> None:
    store: dict[bytes, bytes] = {}
    index = DueIndex(lambda: iter(list(store.items())))
    rng = random.Random(seed)
    for step in steps:
        if step[0] == "write":
            written = cast("list[tuple[bytes, tuple[int, int] | None]]", step[1])
            items = [(k, None if d is None else encode_due(*d)) for k, d in written]
            for key, value in items:
                if value is None:
                    store.pop(key, None)
                else:
                    store[key] = value
            index.changed(items)
        elif step[0] == "invalidate":
            index.invalidate()
        else:
            limit = step[1]
            assert isinstance(limit, int)
            other = rng.choice([-1, 0, 5, 10, limit])
            for event, wall in ((limit, other), (other, limit)):
                expected = sorted(
                    k
                    for k, v in store.items()
                    if int.from_bytes(v[:8], "big", signed=True) <= event
                    or int.from_bytes(v[8:], "big", signed=True) <= wall
                )
                assert index.due(event, wall) == expected, (event, wall)
