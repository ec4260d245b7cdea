"""A tick that kills the processor costs only the item that kills it, not all its keys.

A tick applies to every key living in its partition that has something due, and fires their
timers, window results and expiries. When one key's timer (or window result) kills the
process, the crash guard (``framework.runtime.crashes``) must not skip the tick for all of
them: a receiver that gains only the others (a growth split them off, a scale moved them)
replays the tick, never meets the killer, applies it, and ends with other state for them than
their owner had. So while crash suspects remain, a tick runs *watched*: the attempt names
each key and due item before it fires (``CrashGuard.watch``), a death counts against that
item, and an item that killed the processor ``crash_limit`` times is dropped as failed, its
function not run: a dead letter (stage ``timer`` or ``window``) as if it had raised, and the
skip recorded. The tick applies to that key without it (the key's time takes the tick, its
other items fire) and to every other key as usual. Every reader that applies the tick to
that key dies on the same item and drops it too (the live loop, a restart's rebuild, a
catch-up, the Spark fold: ``framework.bootstrap.crash_watch``), so every reader builds the
same state; and the item does not stay due to kill the next tick or record of its key. With
``on_error: stop`` the processor stops instead, naming it.

A death while no item fired (working out which keys the tick reaches, writing their time) is
none's doing; ``crash_limit`` of those stop the processor: skipping the tick for all its keys
would make its readers differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from framework.errors import ProcessorStoppedError
from framework.processing import DeadLetter, EncodedOutput, InputMessage, RecordProcessor
from framework.runtime.crashes import CrashGuard
from framework.time.due_items import DueItem
from framework.time.ticks import is_tick_message
from rebalance.positions import Position
from statestore import StateBatch

__all__ = ["guarded_tick", "lone_ticks"]


def lone_ticks(
    records: Iterable[tuple[InputMessage, str, int, int]], ranges: dict[Position, list[int]]
) -> set[tuple[str, int, int]]:
    """Where the ticks among ``records`` are that make up a range of ``ranges`` alone (the
    ticks a crash guard may watch, ``CrashGuard.attempt``)."""
    lone = {position: first for position, (first, last) in ranges.items() if first == last}
    if not lone:
        return set()
    return {
        (topic, partition, offset)
        for message, topic, partition, offset in records
        if lone.get((topic, partition)) == offset and is_tick_message(topic, message)
    }


def guarded_tick(
    guard: CrashGuard,
    records: RecordProcessor,
    batch: StateBatch,
    tick: InputMessage,
    where: tuple[str, int, int],
    *,
    restore: bool,
    keys: Callable[[bytes], bool] | None,
) -> tuple[list[EncodedOutput], DeadLetter | None]:
    """Apply the tick at ``where`` (to the keys ``keys`` accepts, when given) while crash
    suspects remain, as ``RecordProcessor.process`` does: watched item by item, the items
    that killed the processor ``crash_limit`` times dropped as failed (their dead letters
    come with the timers', ``RecordProcessor.take_letters``; see the module).
    ``ProcessorStoppedError`` when it killed the processor that often while no item fired,
    or (from the dropped item) with ``on_error: stop``."""
    timing = records.timing
    if timing is None:  # an app without time: nothing of a tick runs a function
        return records.process(batch, tick, restore=restore, where=where, keys=keys)
    topic, partition, offset = where
    deaths = guard.tick_deaths(topic, partition, offset)
    if deaths.outside >= guard.limit:
        raise ProcessorStoppedError(
            f"the tick at {topic}[{partition}]@{offset} killed the processor {deaths.outside} "
            "times while none of its timers, window results or expiries ran (while it worked "
            "out which keys it makes due, or wrote their time: it ran out of memory, say). It "
            "cannot be skipped for some keys only, and skipped for all of them its readers "
            "would differ, so the processor stops. Fix the cause (more memory), then restart.",
            at=where,
        )
    killers = {item: n for item, n in deaths.items.items() if n >= guard.limit}
    refused = {
        (key, item): (
            f"it killed the processor {n} times at the tick {topic}[{partition}]@{offset} (the "
            "process exited, crashed, ran out of memory or was killed while it ran); after "
            "crash_limit crashes it is dropped without running"
        )
        for (key, item), n in killers.items()
    }
    position = (topic, partition)
    guard.watch(position, None)  # a death from here on names the item firing (or none)
    with timing.guarding(partial(_watch, guard, position), refused):
        applied = records.process(batch, tick, restore=restore, where=where, keys=keys)
    guard.watch(position, None, watching=False)  # (a death from here on is not the tick's)
    if killers:
        guard.skip_items(batch, where, killers)
    return applied


def _watch(guard: CrashGuard, position: Position, key: bytes, item: DueItem) -> None:
    guard.watch(position, (key, item))
