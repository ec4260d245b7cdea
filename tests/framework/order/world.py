"""Random logs of several inputs, a reference of each key's canonical order computed from them
by hand, and readers that feed a ``MergeBuffer`` from them in a drawn interleaving."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hypothesis import strategies as st

from framework.order import NO_FLOOR, Item, MergeBuffer
from rebalance.positions import Position

#: an entry's kinds: a record of a key, a tick of the app, something that is not an item of
#: the app (another app's tick, a transaction marker)
RECORD, TICK, OTHER = "record", "tick", "other"
#: an item's identity, what the per-key sequences hold
Ref = tuple[Position, int]


@dataclass(frozen=True)
class Entry:
    """The log entry at one offset."""

    kind: str
    key: bytes | None = None
    event_time: int | None = None


@dataclass
class Log:
    """The input topics (config order), their partitions' entries (offset = index) and the
    keys; key number ``n`` lives in partition ``n % count`` of each topic."""

    inputs: tuple[str, ...]
    partitions: dict[Position, list[Entry]]
    keys: tuple[bytes, ...]

    def count(self, topic: str) -> int:
        return sum(1 for position in self.partitions if position[0] == topic)

    def home(self, key: bytes, topic: str) -> Position:
        return topic, self.keys.index(key) % self.count(topic)

    def keys_at(self, position: Position) -> list[bytes]:
        return [key for key in self.keys if self.home(key, position[0]) == position]

    def ends(self) -> dict[Position, int]:
        return {position: len(entries) for position, entries in self.partitions.items()}


def reference(log: Log) -> dict[bytes, list[Ref]]:
    """Each key's canonical order, from the definition: per input its items in offset order
    with their marks (running max of event times from ``NO_FLOOR``), merged by taking each time
    the head with the least ``(mark, input)``."""
    order: dict[bytes, list[Ref]] = {}
    for key in log.keys:
        sequences = []
        for index, topic in enumerate(log.inputs):
            position = log.home(key, topic)
            mark = NO_FLOOR
            sequence = []
            for offset, entry in enumerate(log.partitions[position]):
                if entry.kind == OTHER:
                    continue
                if entry.event_time is not None and entry.event_time > mark:
                    mark = entry.event_time
                if entry.kind == TICK or entry.key == key:
                    sequence.append((mark, index, (position, offset)))
            sequences.append(sequence)
        merged: list[Ref] = []
        while any(sequences):
            least = min((s for s in sequences if s), key=lambda s: (s[0][0], s[0][1]))
            merged.append(least.pop(0)[2])
        order[key] = merged
    return order


def mark_at(log: Log, position: Position, offset: int) -> int:
    """The mark of ``position`` read from its start up to ``offset``."""
    mark = NO_FLOOR
    for entry in log.partitions[position][:offset]:
        if entry.kind != OTHER and entry.event_time is not None:
            mark = max(mark, entry.event_time)
    return mark


def items_before(log: Log, position: Position, offset: int) -> list[Ref]:
    """The items of ``position`` before ``offset``."""
    entries = log.partitions[position][:offset]
    return [(position, o) for o, entry in enumerate(entries) if entry.kind != OTHER]


def per_key(log: Log, items: Iterable[Item[None]]) -> dict[bytes, list[Ref]]:
    """The released items as each key sees them (a tick: every key living where it is)."""
    found: dict[bytes, list[Ref]] = {key: [] for key in log.keys}
    for item in items:
        for key in [item.key] if item.key is not None else log.keys_at(item.position):
            found[key].append((item.position, item.offset))
    return found


@st.composite
def logs(draw: st.DrawFn) -> Log:
    """2-3 inputs of 1-3 partitions each, 2-4 keys, 0-8 entries a partition: records (20%
    without event time), ticks and entries that are not items; event times 0-12 (ties and
    out-of-order times are common)."""
    inputs = tuple(f"in{i}" for i in range(draw(st.integers(2, 3))))
    keys = tuple(f"k{i}".encode() for i in range(draw(st.integers(2, 4))))
    times = st.one_of(st.none(), st.integers(0, 12), st.integers(0, 12), st.integers(0, 12))
    partitions: dict[Position, list[Entry]] = {}
    for topic in inputs:
        count = draw(st.integers(1, 3))
        for partition in range(count):
            homed = [k for n, k in enumerate(keys) if n % count == partition]
            kinds = [RECORD] * 6 + [TICK, OTHER] if homed else [TICK, OTHER]
            entries = []
            for _ in range(draw(st.integers(0, 8))):
                kind = draw(st.sampled_from(kinds))
                if kind == RECORD:
                    entries.append(Entry(RECORD, draw(st.sampled_from(homed)), draw(times)))
                elif kind == TICK:
                    entries.append(Entry(TICK, None, draw(st.integers(0, 12))))
                else:
                    entries.append(Entry(OTHER))
            partitions[(topic, partition)] = entries
    return Log(inputs, partitions, keys)


#: a schedule step: (which partition among those with more to read, how many entries, whether
#: to release after it)
Step = tuple[int, int, bool]
schedules = st.lists(st.tuples(st.integers(0, 99), st.integers(1, 4), st.booleans()), max_size=40)


@dataclass
class Reader:
    """A reader of ``log`` through a ``MergeBuffer``: from ``starts`` with ``bases`` (default:
    each partition's start, ``NO_FLOOR``), reading each partition up to ``stops``."""

    log: Log
    starts: dict[Position, int] = field(default_factory=dict)
    make: Callable[[tuple[str, ...]], MergeBuffer[None]] = MergeBuffer
    bases: dict[Position, int] = field(default_factory=dict)
    buffer: MergeBuffer[None] = field(init=False)
    cursors: dict[Position, int] = field(init=False)
    released: list[Item[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.buffer = self.make(self.log.inputs)
        self.cursors = {}
        for position in sorted(self.log.partitions):
            start = self.starts.get(position, 0)
            self.buffer.assign(position, start, self.bases.get(position, NO_FLOOR))
            self.cursors[position] = start

    def feed(self, position: Position, count: int, stop: int) -> None:
        """Read up to ``count`` more entries of ``position``, not past ``stop``."""
        entries = self.log.partitions[position]
        upto = min(self.cursors[position] + count, stop)
        for offset in range(self.cursors[position], upto):
            entry = entries[offset]
            if entry.kind != OTHER:
                self.buffer.add(position, offset, entry.key, entry.event_time, None)
        self.cursors[position] = max(upto, self.cursors[position])
        self.buffer.passed(position, self.cursors[position])

    def release(self) -> list[Item[None]]:
        items = self.buffer.release()
        self.released.extend(items)
        return items

    def drive(
        self,
        schedule: Iterable[Step],
        stops: dict[Position, int],
        check: Check | None = None,
        *,
        finish: bool = True,
    ) -> None:
        """Read in the order ``schedule`` draws, releasing where it says, then (``finish``) the
        rest partition by partition, and release; ``check`` after each release."""
        for choice, count, release in schedule:
            open_ = [p for p in sorted(stops) if self.cursors[p] < stops[p]]
            if not open_:
                break
            self.feed(open_[choice % len(open_)], count, stops[open_[choice % len(open_)]])
            if release:
                self.release()
                if check is not None:
                    check(self)
        if not finish:
            return
        for position in sorted(stops):
            self.feed(position, stops[position], stops[position])
        self.release()
        if check is not None:
            check(self)


def live_run_is_canonical(log: Log, schedule: list[Step], reader: Reader | None = None) -> bool:
    """Whether a live reader (``reader``: of ``log``, a fresh one by default) releases each key's
    items in its canonical order, after every release and once every partition is ended."""
    reader = reader or Reader(log)
    check = Check(log)
    try:
        reader.drive(schedule, log.ends(), check)
        for position, end in log.ends().items():
            reader.buffer.end(position, end)
        reader.release()
        check(reader)
    except AssertionError:
        return False
    return per_key(log, reader.released) == check.canonical


class Check:
    """What a reader's released items must be after every release: per key a prefix of the
    canonical order, after ``before`` (items a previous reader applied), and each blocker of
    the least waiting head has nothing waiting."""

    def __init__(self, log: Log, before: dict[bytes, list[Ref]] | None = None) -> None:
        self.log = log
        self.canonical = reference(log)
        self.before = before or defaultdict(list)

    def __call__(self, reader: Reader) -> None:
        for key, seen in per_key(self.log, reader.released).items():
            got = self.before[key] + seen
            assert got == self.canonical[key][: len(got)], (key, got, self.canonical[key])
        blocking = reader.buffer.blocking()
        if blocking is not None:
            assert all(blocker.pending == 0 for blocker in blocking.blockers), blocking
