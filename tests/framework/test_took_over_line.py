"""The log line of a receiver taking its partitions over says what its bulk build counted
(found by a new user: "36 built in bulk before (keys or records)")."""

from __future__ import annotations

import pytest

from framework.runtime.catchup_apply import took_over
from rebalance.control_records import Handoff
from rebalance.states import HandoffPhase


@pytest.mark.parametrize(
    ("bootstrap", "bulk", "said"),
    [
        ("snapshot", 36, "; before that it took 36 keys from its sources' snapshots"),
        ("spark", 1200, "; before that Spark folded 1,200 records"),
        ("replay", 0, ""),
        ("snapshot", 0, ""),  # nothing to take (or no snapshot: replayed instead)
    ],
)
def test_took_over_names_what_was_built_in_bulk(bootstrap: str, bulk: int, said: str) -> None:
    handoff = Handoff(0, 2, (("w", 2),), HandoffPhase.COMPLETE, {("w", 2): 780})
    line = took_over(2, handoff, 40, 0.5, bulk, bootstrap=bootstrap)
    assert line == (
        "processor 2 took over [('w', 2)] from processor 0 at {('w', 2): 780}; replayed 40 "
        f"records in 0.5s (80/s){said}"
    )
    assert "keys or records" not in line
