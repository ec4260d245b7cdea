"""Review (time, 2): a tick whose application killed its owner ``crash_limit`` times.

The crash guard skips a record that killed the processor alone ``crash_limit`` times: its
state change is not applied, by the processor and by every replay of it. A record changes one
key, so a receiver that gains the key meets the same death and skips it too. A tick changes
every key living in its partition that has something due: when one key's timer (or window
result) killed the process, the owner skipped the tick for all of them, while a receiver that
gains only some of those keys (a growth split them off to a child it takes over) never runs
the killing key, applied the tick to the keys it gains, and ended with other state for them
than their owner had at F. Now only the item that kills is dropped (as failed), by every
reader that meets it (``framework.runtime.tick_guard``).
"""

from __future__ import annotations

from pathlib import Path

from framework.runtime.crashes import skipped_records
from rebalance import TopicHistory
from tests.framework.test_moved_keys import all_completed
from tests.framework.time_world import (
    GRACE,
    SIZE,
    TOPIC,
    Owner,
    append_record,
    append_tick,
    catch_up,
    keys_in,
    memory_kafka,
    released,
    scaled,
    started,
    state_of,
    stored,
    window_app,
)

#: 2 partitions grown to 4: partition 2 split from 0 at offset 3 (its marker), 3 from 1 at 0
GROWN = {"counts": [2, 4], "thresholds": {"2": 3, "3": 0}}


def test_a_tick_its_owner_skipped_is_skipped_for_the_keys_a_receiver_gains(
    tmp_path: Path,
) -> None:
    """One initial processor, ``in`` grown 2 -> 4, then scaled 1 -> 2 -> 3: processor 2
    gains partition 2 (split off 0) from processor 0, and replays 0 up to the threshold for
    the keys it gains. In partition 0 before the threshold, a tick closes the first windows
    of ``stays`` (it lives on in 0) and ``moves`` (it moved to 2). Closing ``stays``'s window
    killed processor 0 every time (its result ran out of memory, say): after crash_limit
    deaths its guard drops that window, its result not run, and applies the tick to both keys
    (was: it skipped the tick for both). Then a record of ``moves`` in that first window lands
    in 2: the receiver, which applied the tick, finds it closed (a late record), and so must
    processor 0 (was: it added it to the window it had kept open, and differed from the
    receiver at F)."""
    kafka = memory_kafka(4)
    stays, moves = keys_in(0, 2, 4, 1)[0], keys_in(2, 2, 4, 1)[0]
    app = window_app(tmp_path, partitions=2, initial=1, killer=stays)
    append_record(kafka, 0, stays, 1, at=1_000)
    append_record(kafka, 0, moves, 2, at=2_000)
    append_tick(kafka, 0, floor=SIZE + GRACE + 1)  # offset 2: closes both first windows
    final = append_record(kafka, 2, moves, 4, at=5_000) + 1
    history = TopicHistory.of(TOPIC, (2, 4), {2: 3, 3: 0})
    owner = Owner(app, 0, {TOPIC: history})
    deaths, letters = owner.process_careful(stored(kafka, 0))
    assert deaths == app.config.crash_limit  # each time stays's window result ran
    [letter] = letters  # the window dropped, its result not run
    assert (letter.key, letter.stage, letter.offset) == (stays, "window", 2)
    assert "killed the processor 3 times at the tick in[0]@2" in letter.reason
    [outputs] = owner.emitted.values()  # moves's window closed at the tick
    assert [output.key for output in outputs] == [moves]
    [skipped] = skipped_records(owner.database)
    assert (skipped.offset, skipped.keys) == (2, (stays,))
    owner.process(stored(kafka, 2))
    state = scaled(all_completed(scaled(started("timed", 1, 2), 1, 2, GROWN)), 2, 3, GROWN)
    state = released(state, 0, 2, {2: final})
    receiver = Owner(app, 2, {TOPIC: history}).database
    catch_up(kafka, app, state, 2, receiver)
    assert state_of(receiver, [moves]) == state_of(owner.database, [moves])
