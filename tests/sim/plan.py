"""What one simulated schedule does, drawn from its seed (and shrunk by removing parts)."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

__all__ = [
    "COMPACTED_GROWTH",
    "SHRINK_DRAWS",
    "Operation",
    "Plan",
    "draw_plan",
    "rival_operations",
    "shrink_target",
]

#: whether plans with a compacted input also change its partitions (a growth writes keyed
#: markers to a compacted input: issue 34 part D)
COMPACTED_GROWTH = True
#: whether the operator also shrinks the input (``expand`` to fewer partitions: issue 34)
SHRINK_DRAWS = True
#: the share of plans (with an output topic, not compacted) whose app keeps time
TIMED_RATE = 0.6


@dataclass(frozen=True)
class Operation:
    """One operator action: ``scale`` to ``value`` processors, ``expand`` the input to
    ``value`` partitions, or ``abort`` the scale in progress; after ``delay`` seconds."""

    kind: str
    value: int = 0
    delay: float = 0.0

    def __str__(self) -> str:
        what = self.kind if self.kind == "abort" else f"{self.kind} {self.value}"
        return f"after {self.delay:.1f}s {what}"


@dataclass(frozen=True)
class Plan:
    """A schedule's world, work, operations and faults."""

    seed: int
    partitions: int = 2
    initial_processors: int = 2
    keys: int = 6
    producers: int = 1
    records: int = 40
    max_records: int = 5
    ready_lag: int = 5
    operations: tuple[Operation, ...] = ()
    #: chance per scheduler step that a random processor or producer is killed
    kill_rate: float = 0.0
    #: chance per broker call that it fails (KafkaIOError)
    fail_rate: float = 0.0
    #: chance per registry/metadata read that its reply comes late (up to 4s)
    slow_rate: float = 0.0
    #: chance that a participant of a handoff is killed right after the handoff moved on
    protocol_kill_rate: float = 0.0
    #: chance per step that the broker becomes unreachable for 1-6 seconds
    outage_rate: float = 0.0
    #: chance per step that retention deletes a processed prefix of an input partition
    retention_rate: float = 0.0
    #: chance per step that the control log and the registry are compacted
    compact_rate: float = 0.0
    #: chance per kill that the killed processor's state directory is lost too
    lose_disk_rate: float = 0.0
    #: chance that the run re-creating a lost state directory is killed at its next call
    reopen_kill_rate: float = 0.0
    #: chance of each fault aimed at a protocol window (``tests/sim/aimed.py``)
    aimed_rate: float = 0.0
    #: chance per record that it is special: poison or huge (``tests/sim/app.py``)
    special_rate: float = 0.0
    #: whether special records include killers (else only poison and huge ones)
    killers: bool = False
    #: whether the app has an output topic (without one, nothing renews its output lease)
    outputs: bool = True
    #: whether the clock jumps 12 days half-way through the chaos phase (a suspended machine)
    days_later: bool = False
    #: records a producer queues before ``produce`` raises ``BufferError`` (librdkafka's
    #: ``queue.buffering.max.messages``): a few make producers wait for room
    max_queued: int = 100_000
    #: whether a second operator races the first, scaling to neighbouring counts
    rival: bool = False
    rocksdb: bool = False
    #: whether processors take snapshots and join (and restore a lost disk) by them
    snapshots: bool = False
    #: whether outputs are exactly-once (a transaction per batch; no output may repeat)
    exactly_once: bool = False
    #: batches processed ahead of their commit (``batch.in_flight``; 1: none)
    in_flight: int = 1
    #: steps of the chaos phase (then faults stop and the world must settle)
    chaos_steps: int = 4000
    #: kills the shrinker allows at most (None: as the rates say)
    max_kills: int | None = None
    #: whether an upstream app's exactly-once outputs are input too: a producer writing in
    #: transactions (offsets taken by records and markers alike) that abort at ``abort_rate``
    upstream: bool = False
    #: the chance that each of the upstream producer's transactions aborts
    abort_rate: float = 0.0
    #: an input partition (of the initial count) whose keys only the upstream producer
    #: writes, only in transactions that abort: it and its children hold aborted records
    #: and markers only (``None``: no such partition)
    aborted_partition: int | None = None
    #: whether a second instance of a processor (another machine, its own state directory:
    #: a mistaken second pod) starts ``twin_at`` simulated seconds in, or, with
    #: ``twin_receiver``, ``twin_at`` seconds after the first receiver of a scale began its
    #: catch-up (a new processor's pod started twice); ``twin_for`` seconds later the
    #: operator stops one of the two: the first one (``stop_first``, the twin's machine runs
    #: the processor from then on) or the twin
    twin: bool = False
    twin_receiver: bool = False
    twin_at: float = 0.0
    twin_for: float = 0.0
    stop_first: bool = False
    #: whether someone writes records no reader can read to the control log, the topic
    #: registry and the progress topic (``tests/sim/junk.py``)
    junk: bool = False
    #: whether the input is a compacted topic (``tests/sim/compacted.py``): the app keeps each
    #: key's latest value, producers also delete keys, and the input is compacted at
    #: ``compact_rate`` too
    compacted: bool = False
    #: whether the app keeps time (``tests/sim/timed_app.py``): windows, timers and a ttl
    #: over the records' timestamps, with ticks in the input (``tests/sim/ticker.py``)
    timed: bool = False

    def describe(self) -> str:
        """The plan as readable lines."""
        lines = [
            f"seed {self.seed}: input {self.partitions} partitions, {self.initial_processors} "
            f"processors, {self.keys} keys, {self.producers} producer(s) x {self.records} "
            f"records, batches of {self.max_records}, ready_lag {self.ready_lag}, "
            f"{'RocksDB' if self.rocksdb else 'memory'} stores",
            f"faults: kill {self.kill_rate:.4f}/step and {self.protocol_kill_rate:.2f}/handoff "
            f"step (at most {self.max_kills}), fail {self.fail_rate:.4f}/call, slow "
            f"{self.slow_rate:.3f}/read, outage {self.outage_rate:.4f}/step, retention "
            f"{self.retention_rate:.4f}/step, compact "
            f"{self.compact_rate:.4f}/step, lose disk "
            f"{self.lose_disk_rate:.2f}/kill (then killed again at once "
            f"{self.reopen_kill_rate:.1f}), aimed faults {self.aimed_rate:.1f}, special records "
            f"{self.special_rate:.2f}/record{' with killers' if self.killers else ''}, "
            f"{'an' if self.outputs else 'no'} output topic, "
            f"{'a 12-day clock jump, ' if self.days_later else ''}producers queue at most "
            f"{self.max_queued}, {'a rival operator, ' if self.rival else ''}"
            f"{'snapshots, ' if self.snapshots else ''}"
            f"{'exactly-once outputs, ' if self.exactly_once else ''}"
            f"{'records no reader can read, ' if self.junk else ''}"
            f"{'a compacted input (latest values, deletes), ' if self.compacted else ''}"
            f"{'windows, timers and a ttl (ticks in the input), ' if self.timed else ''}"
            f"{self.in_flight} batches in flight, chaos for {self.chaos_steps} steps",
        ]
        if self.upstream:
            only = (
                ""
                if self.aborted_partition is None
                else f"; partition {self.aborted_partition}'s keys only in aborted ones"
            )
            lines.append(
                f"an upstream producer writes in transactions, {self.abort_rate:.1f} of "
                f"them aborted{only}"
            )
        if self.twin:
            stopped = "the first instance" if self.stop_first else "the twin"
            when = (
                f"{self.twin_at:.1f}s after a receiver's catch-up began"
                if self.twin_receiver
                else f"at t={self.twin_at:.1f}s"
            )
            lines.append(
                f"a twin of a processor starts {when}; {stopped} is stopped "
                f"{self.twin_for:.1f}s later"
            )
        lines += [f"  {i + 1}. {op}" for i, op in enumerate(self.operations)]
        return "\n".join(lines)

    def literal(self) -> str:
        """The plan as Python (to keep a failing schedule as a regression case)."""
        return repr(self).replace("tests.sim.plan.", "")

    def simpler(self) -> list[Plan]:
        """Smaller variants of this plan, most aggressive first (for shrinking)."""
        ops = self.operations
        out = [replace(self, operations=ops[:i] + ops[i + 1 :]) for i in range(len(ops))]
        fewer_kills = 1 if self.max_kills is None else max(0, self.max_kills - 1)
        candidates = [
            replace(self, kill_rate=0.0),
            replace(self, protocol_kill_rate=0.0),
            replace(self, max_kills=fewer_kills),
            replace(self, fail_rate=0.0),
            replace(self, slow_rate=0.0),
            replace(self, outage_rate=0.0),
            replace(self, retention_rate=0.0),
            replace(self, compact_rate=0.0),
            replace(self, lose_disk_rate=0.0),
            replace(self, reopen_kill_rate=0.0),
            replace(self, aimed_rate=0.0),
            replace(self, special_rate=0.0),
            replace(self, killers=False),
            replace(self, days_later=False),
            replace(self, outputs=True),
            replace(self, max_queued=100_000),
            replace(self, rival=False),
            replace(self, rocksdb=False),
            replace(self, snapshots=False),
            replace(self, exactly_once=False),
            replace(self, in_flight=1),
            replace(self, twin=False),
            replace(self, junk=False),
            replace(self, compacted=False),
            replace(self, timed=False),
            replace(self, upstream=False, abort_rate=0.0, aborted_partition=None),
            replace(self, aborted_partition=None),
            replace(self, abort_rate=0.0),
            replace(self, producers=max(1, self.producers - 1)),
            replace(self, keys=max(1, self.keys // 2)),
            replace(self, records=max(4, self.records // 2)),
            replace(self, chaos_steps=max(500, self.chaos_steps // 2)),
        ]
        return out + [candidate for candidate in candidates if candidate != self]


def draw_plan(seed: int) -> Plan:
    """The plan of schedule ``seed``."""
    rng = random.Random(seed)
    initial_processors = rng.choice([1, 2, 2])
    partitions = initial_processors * rng.choice([1, 2, 2])
    if SHRINK_DRAWS and rng.random() < 0.35:
        operations = _changes(rng, initial_processors, partitions)
    elif rng.random() < 0.3:
        operations = _out_and_back(rng, initial_processors, partitions)
    else:
        operations = _random_operations(rng, initial_processors, partitions)
    chaotic = rng.random() < 0.8
    plan = Plan(
        seed=seed,
        partitions=partitions,
        initial_processors=initial_processors,
        keys=rng.randint(2, 8),
        producers=rng.choice([1, 1, 2]),
        records=rng.randint(10, 60),
        max_records=rng.choice([1, 3, 5, 20]),
        ready_lag=rng.choice([0, 2, 10]),
        operations=tuple(operations),
        kill_rate=rng.choice([0.0, 0.001, 0.003, 0.01]) if chaotic else 0.0,
        fail_rate=rng.choice([0.0, 0.0, 0.002, 0.01]) if chaotic else 0.0,
        slow_rate=rng.choice([0.0, 0.0, 0.05, 0.2]) if chaotic else 0.0,
        protocol_kill_rate=rng.choice([0.0, 0.2, 0.5]) if chaotic else 0.0,
        outage_rate=rng.choice([0.0, 0.0, 0.0005, 0.002]) if chaotic else 0.0,
        retention_rate=rng.choice([0.0, 0.0, 0.0, 0.001]) if chaotic else 0.0,
        compact_rate=rng.choice([0.0, 0.002, 0.01]),
        lose_disk_rate=rng.choice([0.0, 0.0, 0.3]) if chaotic else 0.0,
        rocksdb=rng.random() < 0.33,
        chaos_steps=rng.choice([1000, 3000, 6000]),
    )
    # drawn last, so that the fields above stay what they were for a seed
    if plan.lose_disk_rate:
        plan = replace(plan, reopen_kill_rate=rng.choice([0.0, 0.5, 1.0]))
    if chaotic:
        plan = replace(plan, aimed_rate=rng.choice([0.0, 0.5, 1.0]))
    plan = replace(plan, special_rate=rng.choice([0.0, 0.0, 0.03, 0.1]))
    plan = replace(plan, killers=bool(plan.special_rate) and rng.random() < 0.5)
    plan = replace(plan, outputs=rng.random() >= 0.15, days_later=rng.random() < 0.2)
    plan = replace(plan, max_queued=rng.choice([100_000, 100_000, 1, 3]))
    plan = replace(plan, rival=bool(plan.operations) and rng.random() < 0.2)
    plan = replace(plan, snapshots=rng.random() < 0.5)
    plan = replace(plan, exactly_once=rng.random() < 0.3)
    plan = replace(plan, in_flight=rng.choice([1, 2, 4]))
    if rng.random() < 0.4:
        aborted = rng.randrange(plan.partitions) if rng.random() < 0.5 else None
        plan = replace(
            plan, upstream=True, abort_rate=rng.choice([0.2, 0.5]), aborted_partition=aborted
        )
    if rng.random() < 0.3:
        receiver = any(op.kind == "scale" for op in plan.operations) and rng.random() < 0.5
        plan = replace(
            plan,
            twin=True,
            twin_receiver=receiver,
            twin_at=round(rng.uniform(0.0, 2.0 if receiver else 10.0), 1),
            twin_for=round(rng.uniform(2.0, 60.0), 1),
            stop_first=rng.random() < 0.5,
        )
    plan = replace(plan, junk=rng.random() < 0.2)
    if rng.random() < 0.25 and (COMPACTED_GROWTH or all(op.kind != "expand" for op in operations)):
        plan = replace(plan, compacted=True, compact_rate=rng.choice([0.002, 0.01, 0.03]))
    # (with an output topic for its results; a compacted input takes no keyless ticks)
    if plan.outputs and not plan.compacted and rng.random() < TIMED_RATE:
        plan = replace(plan, timed=True)
    return plan


def rival_operations(plan: Plan) -> tuple[Operation, ...]:
    """What a second operator does, racing the first: the same operations a moment later,
    each scale to a neighbouring count, the first one last (so that its scales meet the
    first's growths and the other way round)."""
    rival = []
    for operation in (*plan.operations[1:], *plan.operations[:1]):
        value = operation.value
        if operation.kind == "scale":
            value = value - 1 if value - 1 >= plan.initial_processors else value + 1
        rival.append(Operation(operation.kind, value, operation.delay + 0.05))
    return tuple(rival)


def _out_and_back(rng: random.Random, initial: int, partitions: int) -> list[Operation]:
    """Grow the input, scale out past the initial partitions, then all the way back in (a
    receiver with several sources), maybe out again."""
    grown = partitions * rng.choice([2, 4])
    top = rng.randint(max(initial + 1, partitions + 1), grown)
    operations = [
        Operation("expand", grown, round(rng.uniform(0.0, 2.0), 1)),
        Operation("scale", top, round(rng.uniform(0.0, 2.0), 1)),
        Operation("scale", initial, round(rng.uniform(0.0, 3.0), 1)),
    ]
    if rng.random() < 0.5:
        again = rng.randint(initial + 1, grown)
        operations.append(Operation("scale", again, round(rng.uniform(0.0, 3.0), 1)))
    elif SHRINK_DRAWS and rng.random() < 0.5:  # back in, then the input back down and up
        down = rng.randint(partitions, grown - 1)
        operations.append(Operation("expand", down, round(rng.uniform(0.0, 3.0), 1)))
        operations.append(Operation("expand", grown, round(rng.uniform(0.0, 3.0), 1)))
    return operations


def _changes(rng: random.Random, initial: int, partitions: int) -> list[Operation]:
    """Two to six changes of the input's partition count, about a third of them shrinks
    (never below the initial count or the processors), with scales between some of them."""
    operations: list[Operation] = []
    count, processors = partitions, initial
    for _ in range(rng.randint(2, 6)):
        if rng.random() < 0.3:  # a scale first (out or in, within the count)
            choices = [p for p in range(initial, count + 1) if p != processors]
            if choices:
                processors = rng.choice(choices)
                delay = round(rng.uniform(0.0, 3.0), 1)
                operations.append(Operation("scale", processors, delay))
        target = shrink_target(rng, count, max(partitions, processors))
        if target is None or rng.random() >= 1 / 3:
            target = rng.randint(count + 1, 2 * count)
        count = target
        operations.append(Operation("expand", count, round(rng.uniform(0.0, 3.0), 1)))
    return operations


def shrink_target(rng: random.Random, count: int, low: int) -> int | None:
    """A count to shrink ``count`` partitions to, not below ``low`` (``None``: none is)."""
    return rng.randint(low, count - 1) if low < count else None


def _random_operations(rng: random.Random, initial: int, partitions: int) -> list[Operation]:
    """One to four scales, growths and aborts, mostly ones the layout allows."""
    initial_processors = initial
    operations: list[Operation] = []
    grown, processors = partitions, initial_processors
    for _ in range(rng.choice([1, 2, 2, 3, 4])):
        kind = rng.choice(["scale", "scale", "scale", "expand", "abort"])
        if kind == "scale":  # mostly a count the layout allows, sometimes one it refuses
            choices = [p for p in range(initial_processors, grown + 1) if p != processors]
            extremes = [p for p in (initial_processors, grown) if p != processors]
            if extremes and rng.random() < 0.4:  # all the way in or out: several sources
                choices = extremes
            value = rng.choice(choices) if choices and rng.random() < 0.9 else grown + 1
            processors = value if value <= grown else processors
        elif kind == "expand":
            low = max(partitions, processors)
            if SHRINK_DRAWS and rng.random() < 1 / 3 and low < grown:
                value = grown = rng.randint(low, grown - 1)
            else:
                value = grown * rng.choice([2, 2, 3]) // rng.choice([1, 1, 2])
                grown = max(grown, value)
        else:
            value = 0
        operations.append(Operation(kind, value, round(rng.uniform(0.0, 3.0), 1)))
    return operations
