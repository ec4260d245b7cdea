"""The invariants a simulated world must hold once it settled.

The input, the outputs and the dead letters are what a ``read_committed`` reader reads of
them: records of aborted (or never ended) transactions and markers are not there. The state
checked is each processor's on the machine it runs on once the world settled (after the
operator stopped one of two instances of a twinned processor: the other one's).

- a key's records are applied in lineage order: the step of the input's history in force
  where each lies (``TopicHistory.rank``), then offset (the producer fence puts a key's
  records in its new home only after its last one in the old, through growths and shrinks);
- every key's state is the fold of exactly the records of that key in the input (no loss, no
  double apply, each producer's records in the order it wrote them), held by its owner only;
  for a compacted input (``tests/sim/compacted.py``) it is the latest value instead, and a
  record the cleaner removed before the app read past it needs no output;
- every input record has outputs, a key's outputs follow each producer's order and carry the
  key's record count right after that record, and a record's outputs are emitted again only
  after the process that emitted them was killed or stopped on an error (a batch cut short),
  or, under at-least-once, when two instances of its processor ran at once (a twin: nothing
  fences the other instance, so either may emit it; each output's count must still be
  right), and never with exactly-once outputs, twin or not;
  a process some of whose records timed out in its producer's queue may have written a later
  output before an earlier one's repeat: its first outputs are exempt from the order;
- a partition's outputs change emitter no more often than its handoffs completed (never two
  owners at once);
- no processor of the generation in force keeps state for keys it does not own;
- the control log's last metadata hash is the input topics' (KIP-1101) hash;
- a special record (``tests/sim/app.py``) is a dead letter: a poison or killer one is never
  applied, a huge one is applied and has no output; so is a late record (one whose key lives
  elsewhere at its offset, ``TopicHistory.home_at``: landed in a parent after the marker of
  the child its key moved to, or in a deleted partition after its drain marker; its producer
  paused longer than its lease), never applied, and only a record queued right after the
  clock jumped or a producer's stall may be late; no other record is a dead letter (no
  compaction tombstone, which no processor may apply either);
- the input never has fewer partitions than the processors (no registry write gives it fewer,
  and the settled world has at least as many).
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from framework.coordination.registry import TopicRegistry
from framework.coordination.topic_watch import input_group_hash
from framework.growth.markers import is_marker
from framework.ops.status import collect_status
from rebalance import TopicHistory, bucket, key_hash
from tests.sim.app import HUGE, INPUT, OUTPUT, FoldState, parse
from tests.sim.broker import StoredRecord
from tests.sim.compacted import (
    check_latest_state,
    compaction_tombstone,
    named,
    previous_problem,
    values_before,
)
from tests.sim.world import World

__all__ = ["Violation", "check_outputs", "check_world", "owner_of"]


@dataclass
class Violation:
    """Broken invariants, with the details that show them."""

    problems: list[str] = field(default_factory=list)

    def add(self, problem: str) -> None:
        """Note one problem (the first few per kind are enough to read)."""
        if len(self.problems) < 30:
            self.problems.append(problem)


#: a record queued this soon after the clock jumped (or a producer's stall) may have been
#: placed before it
_PAUSED_MS = 5_000

#: the kinds of record the function applies to the state, and those that have outputs
_APPLIED = ("", HUGE)
_WITH_OUTPUT = ("",)


def late_records(world: World) -> set[tuple[int, int]]:
    """``(partition, offset)`` of the input records a step of the registry's history says
    their key no longer lives in there (``TopicHistory.home_at``: past the marker of a
    growth's child the key moved to, past a deleted partition's drain marker, or between a
    drain marker and a re-growth's start): placed with an earlier count by a producer that
    paused for longer than its lease (the fence says none may be)."""
    history = _history(world)
    if history is None or not history.steps:
        return set()
    late = set()
    for record in world.broker.committed_records(INPUT):
        if record.key is None or is_marker(record.headers) or compaction_tombstone(record):
            continue
        if (
            history.home_at(key_hash(record.key), record.partition, record.offset)
            != record.partition
        ):
            late.add((record.partition, record.offset))
    return late


def _history(world: World) -> TopicHistory | None:
    """The input's history as the registry holds it now (``None``: not registered)."""
    entry = TopicRegistry(world.driver).read().get(INPUT)
    return None if entry is None else entry.history


def _written(world: World) -> list[tuple[StoredRecord, str, int, str]]:
    """Every record a producer wrote to the input and the input ever held (retention and
    compaction may have deleted some since), less the late ones (no markers, no compaction
    tombstones), with its producer, seq and kind, in the order written."""
    late = late_records(world)
    written = []
    for record in world.broker.committed_records(INPUT):
        if is_marker(record.headers) or (record.partition, record.offset) in late:
            continue
        name = named(record)
        if name is None:
            continue
        assert record.key is not None, f"a keyless record {record}"
        written.append((record, *parse(name)))
    return written


def _input(world: World, kinds: tuple[str, ...]) -> dict[bytes, dict[str, list[int]]]:
    """Each key's delivered seqs per producer, of records of ``kinds`` (``_written``)."""
    seqs: dict[bytes, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for record, producer, seq, kind in _written(world):
        if kind in kinds:
            assert record.key is not None
            seqs[record.key][producer].append(seq)
    return seqs


def _applied(world: World) -> dict[bytes, list[StoredRecord]]:
    """Each key's records the function applies (plain, huge, deletes), in lineage order."""
    order = lineage_order(world)
    by_key: dict[bytes, list[StoredRecord]] = defaultdict(list)
    for record, _producer, _seq, kind in _written(world):
        if kind in _APPLIED:
            assert record.key is not None
            by_key[record.key].append(record)
    return {key: sorted(records, key=order) for key, records in by_key.items()}


def lineage_order(world: World) -> Callable[[StoredRecord], tuple[int, int]]:
    """The order a key's input records are applied in: the step in force where each lies
    (``TopicHistory.rank``: the producer fence puts a key's records in its new home only
    after its last one in the old), then offset (a key has one home per step)."""
    history = _history(world)

    def order(record: StoredRecord) -> tuple[int, int]:
        rank = 0 if history is None else history.rank(record.partition, record.offset)
        return (rank, record.offset)

    return order


def owner_of(world: World, key: bytes, processors: int) -> int:
    """The processor that owns ``key``: its partition's under the registry's count."""
    config = world.app.config
    history = _history(world)
    initial = config.inputs[0].partitions
    count = initial if history is None else history.partitions
    partition = bucket(key_hash(key), initial, count)
    return bucket(partition, config.initial_processors, processors)


def check_world(world: World, processors: int) -> Violation:
    """Check the settled world whose generation in force has ``processors`` processors."""
    found = Violation()
    states: dict[int, dict[bytes, FoldState]] = {}
    for j in range(processors):
        database = world.disks.read(world.state_path(j))
        if database is None:
            states[j] = {}
            continue
        try:
            states[j] = {k: v for k, v in database.items("folds")}
        finally:
            database.close()
    for j, held in states.items():
        for key in held:
            if owner_of(world, key, processors) != j:
                found.add(f"processor {j} holds state for {key!r}, owned by another")
    if world.plan.compacted:
        check_latest_state(
            _applied(world),
            lambda key: states.get(owner_of(world, key, processors), {}).get(key),
            lambda key: owner_of(world, key, processors),
            _kept(world),
            found.add,
        )
    else:
        _check_folds(world, states, processors, found)
    if world.plan.outputs:
        _check_outputs(world, _input(world, _WITH_OUTPUT), found, complete=True)
    _check_dead_letters(world, found)
    _check_status(world, processors, found)
    history = _history(world)
    if history is not None and history.partitions < processors:
        found.add(f"{processors} processors read {INPUT} of {history.partitions} partitions")
    inputs_hash = input_group_hash(world.driver, [INPUT])[0]
    if world.replay_control().metadata_hash != inputs_hash:
        found.add(
            f"the control log's metadata hash is {world.replay_control().metadata_hash}, the "
            f"inputs' {inputs_hash}"
        )
    return found


def _check_folds(
    world: World, states: dict[int, dict[bytes, FoldState]], processors: int, found: Violation
) -> None:
    """Each key's state at its owner is the fold of its records (each producer's last seq,
    their count, no order broken)."""
    for key, producers in sorted(_input(world, _APPLIED).items()):
        owner = owner_of(world, key, processors)
        state = states.get(owner, {}).get(key)
        expected_n = sum(len(s) for s in producers.values())
        expected_last = {p: max(s) for p, s in producers.items()}
        if state is None:
            found.add(f"{key!r}: no state at its owner {owner} (expected {expected_n} records)")
            continue
        if state["n"] != expected_n or state["last"] != expected_last or state["bad"]:
            found.add(
                f"{key!r} at processor {owner}: state n={state['n']} last={state['last']} "
                f"bad={state['bad']}; the input holds n={expected_n} last={expected_last}"
            )


def _check_dead_letters(world: World, found: Violation) -> None:
    """Every special or late record is a dead letter (but one the cleaner removed unread),
    and no other one is (no compaction tombstone)."""
    late = late_records(world)
    special: dict[tuple[int, int], str] = dict.fromkeys(late, "late")
    for record, _producer, _seq, kind in _written(world):
        if kind:
            special[(record.partition, record.offset)] = kind
    tombstones = {
        (record.partition, record.offset)
        for record in world.broker.committed_records(INPUT)
        if compaction_tombstone(record)
    }
    resumes = world.events.resumes
    for record in world.broker.committed_records(INPUT):
        queued = record.timestamp_ms + world.broker.delay(INPUT, record.key, record.value)
        paused = any(at <= queued < at + _PAUSED_MS for at in resumes)
        if (record.partition, record.offset) in late and not paused:
            found.add(
                f"late record {INPUT}[{record.partition}]@{record.offset} was not queued "
                "right after a clock jump or a stall: its producer placed it with a count it "
                "no longer held"
            )
    lettered: set[tuple[int, int]] = set()
    for letter in world.broker.committed_records(world.app.config.dead_letters):
        headers = {name: value for name, value in letter.headers}
        if headers.get("splitstate.topic") != INPUT.encode():
            continue
        where = (
            int(headers["splitstate.partition"] or b"-1"),
            int(headers["splitstate.offset"] or b"-1"),
        )
        lettered.add(where)
        if where in late and headers.get("splitstate.stage") != b"placement":
            found.add(f"late record {INPUT}[{where[0]}]@{where[1]} was processed: {headers}")
        if where in tombstones:
            found.add(f"compaction tombstone {INPUT}[{where[0]}]@{where[1]} is a dead letter")
        elif where not in special:
            found.add(f"plain record {INPUT}[{where[0]}]@{where[1]} is a dead letter: {headers}")
    unread = world.events.unread_compacted  # (the cleaner removed them before any read)
    for where, kind in sorted(special.items()):
        if where not in lettered and where not in unread:
            found.add(f"{kind} record {INPUT}[{where[0]}]@{where[1]} is no dead letter")


def _check_status(world: World, processors: int, found: Violation) -> None:
    """``splitstate status`` agrees with the control state: generation, owners, no lag."""
    status = collect_status(world.app, kafka=world.driver)
    state = world.replay_control()
    generation = state.generation.generation if state.generation else None
    if status.generation != generation or status.scaling_to is not None:
        found.add(
            f"status says generation {status.generation} (scaling to {status.scaling_to}), "
            f"the control log {generation} (scale {state.scaling})"
        )
    # the partitions the app reads: every one the registry's history created (Kafka may hold
    # more: a growth that created them and failed before recording its count)
    history = _history(world)
    created = world.broker.partition_count(INPUT) if history is None else history.created
    counts = {INPUT: created}
    owners = {p: j for j in range(processors) for p in state.owned(j, counts)}
    listed = [p for processor in status.processors for p in processor.partitions]
    for partition in listed:
        position = (partition.topic, partition.partition)
        if partition.topic != INPUT:
            continue
        if owners.get(position) != partition.owner:
            found.add(
                f"status says {position} is processor {partition.owner}'s, the control "
                f"state says {owners.get(position)}'s"
            )
        if partition.lag:
            found.add(f"status shows {position} lagging by {partition.lag} once settled")
    if sorted((p.topic, p.partition) for p in listed) != sorted(owners):
        found.add(f"status lists {sorted((p.topic, p.partition) for p in listed)}")


def check_outputs(world: World) -> Violation:
    """The output invariants of a world that stopped before it settled: what was emitted
    came from one processor per input record and follows each producer's order."""
    found = Violation()
    if world.plan.outputs:
        _check_outputs(world, _input(world, _WITH_OUTPUT), found, complete=False)
    return found


def _check_one_emitter_at_a_time(
    world: World, timeline: dict[tuple[str, int], list[str]], found: Violation
) -> None:
    """The processor emitting a partition's outputs changes only where a handoff of that
    partition completed: never back and forth (two owners at once). A record may still be
    emitted by both sides of a handoff when a kill cut the old owner's batch short."""
    state = world.replay_control()
    handoffs: dict[tuple[str, int], int] = defaultdict(int)
    for scale in (*state.past, *([state.scale] if state.scale is not None else [])):
        for handoff in scale.handoffs.values():
            if handoff.phase.value == "COMPLETE":
                for position in handoff.partitions:
                    handoffs[position] += 1
    for position, order in timeline.items():
        changes = sum(1 for a, b in itertools.pairwise(order) if a != b)
        if changes > handoffs[position]:
            found.add(
                f"outputs of {position} switched emitter {changes} times with "
                f"{handoffs[position]} completed handoffs of it: {_runs(order)}"
            )


def _runs(order: list[str]) -> str:
    """``a x3, b x2``: who emitted, run by run."""
    runs = [(name, len(list(group))) for name, group in itertools.groupby(order)]
    return ", ".join(f"{name} x{count}" for name, count in runs[:12])


def _expected_counts(world: World) -> dict[tuple[str, int, int], int]:
    """The count a key's state must show right after each input record (``_applied``)."""
    counts: dict[tuple[str, int, int], int] = {}
    for records in _applied(world).values():
        for n, record in enumerate(records, start=1):
            counts[(INPUT, record.partition, record.offset)] = n
    return counts


def _check_outputs(
    world: World,
    truth: dict[bytes, dict[str, list[int]]],
    found: Violation,
    *,
    complete: bool,
) -> None:
    """Every record's outputs: present (``complete``), in each producer's order, with the
    key's count right after it, and emitted again only after the process that emitted it
    was killed or stopped on an error (a batch cut short before its state was committed)."""
    #: key -> producer -> (seq, origin) of each output, in the order they were written
    emitted: dict[bytes, dict[str, list[tuple[int, str]]]] = defaultdict(lambda: defaultdict(list))
    #: input record -> the processes that emitted its outputs, in the order they did
    emissions: dict[tuple[str, int, int], list[str]] = defaultdict(list)
    #: input partition -> the processor of each output of its records, in order
    timeline: dict[tuple[str, int], list[str]] = defaultdict(list)
    says = _what_outputs_say(world)
    # under at-least-once, both instances of a twinned processor may emit a record's outputs
    repeats_allowed = set() if world.plan.exactly_once else world.events.twinned
    for record in world.broker.committed_records(OUTPUT):
        assert record.key is not None and record.value is not None
        producer, seq, n, topic, part, offset = json.loads(record.value)
        emitted[record.key][producer].append((seq, record.origin))
        emissions[(topic, part, offset)].append(record.origin)
        if record.origin not in repeats_allowed:
            # the processor that emitted it (either machine's instance)
            emitter = record.origin.partition("#")[0].removeprefix("twin-")
            timeline[(topic, part)].append(emitter)
        problem = says(record.key, producer, n, (topic, part, offset))
        if problem is not None:
            found.add(f"{problem} ({record.key!r} {producer}:{seq} from {record.origin})")
    cut_short = world.events.cut_short
    for where, origins in emissions.items():
        if world.plan.exactly_once and len(origins) > 1:
            found.add(f"outputs of input {where} were emitted {len(origins)} times: {origins}")
        uncut = [
            origin
            for origin in origins[:-1]
            if origin not in cut_short and origin not in repeats_allowed
        ]
        if uncut:
            found.add(
                f"outputs of input {where} were emitted by {origins}, though {uncut} was "
                "neither killed nor stopped on an error"
            )
    _check_one_emitter_at_a_time(world, timeline, found)
    expired = world.broker.expired_origins
    unread = _unread_seqs(world)
    for key, producers in sorted(truth.items()):
        for producer, seqs in producers.items():
            firsts: dict[int, str] = {}  # seq -> the origin that emitted it first
            for seq, origin in emitted.get(key, {}).get(producer, []):
                firsts.setdefault(seq, origin)
            skipped = unread.get((key, producer), set())
            ok = _in_order(firsts, seqs, skipped, expired, complete=complete)
            if not ok:
                found.add(
                    f"{key!r} {producer}: outputs in order {list(firsts)[:20]}, the input "
                    f"holds {sorted(seqs)[:20]}"
                )


def _what_outputs_say(
    world: World,
) -> Callable[[bytes, str, object, tuple[str, int, int]], str | None]:
    """What is wrong with what an output says of its key's state (``None``: nothing): the
    count right after its record, or, for a compacted input, the value right before it
    (``tests/sim/compacted.py``)."""
    if not world.plan.compacted:
        expected = _expected_counts(world)

        def count(key: bytes, producer: str, n: object, where: tuple[str, int, int]) -> str | None:
            if n == expected.get(where):
                return None
            return (
                f"output of {where[0]}[{where[1]}]@{where[2]} says the key had {n} records, "
                f"the input says {expected.get(where)}"
            )

        return count
    kept = _kept(world)
    allowed = {
        (INPUT, record.partition, record.offset): values_before(records, index, kept)
        for records in _applied(world).values()
        for index, record in enumerate(records)
    }

    def previous(
        _key: bytes, producer: str, value: object, where: tuple[str, int, int]
    ) -> str | None:
        return previous_problem(where, value, producer, allowed.get(where, set()))

    return previous


def _in_order(
    firsts: dict[int, str],
    seqs: list[int],
    skipped: set[int],
    expired: set[str],
    *,
    complete: bool,
) -> bool:
    """Whether a producer's records of a key (``seqs``) have their first outputs
    (``firsts``: seq -> origin, in the order emitted) in order: all of them (``complete``)
    or a prefix, but those the cleaner removed unread (``skipped``: they may have none)."""
    top = max(seqs, default=0) if complete else max(firsts, default=0)
    needed = {seq for seq in seqs if seq <= top} - skipped
    if any(origin in expired for origin in firsts.values()):
        # a batch whose earlier output expired in the queue while a later one landed
        # is emitted again: only the other origins' first outputs keep the order
        in_order = [seq for seq, origin in firsts.items() if origin not in expired]
        held = needed <= set(firsts) <= set(seqs) if complete else set(firsts) <= set(seqs)
        return held and in_order == sorted(in_order)
    if skipped:
        return list(firsts) == sorted(firsts) and needed <= set(firsts) <= set(seqs)
    wanted = sorted(seqs) if complete else sorted(seqs)[: len(firsts)]
    return list(firsts) == wanted


def _kept(world: World) -> Callable[[StoredRecord], bool]:
    """Whether the input still holds a record (the cleaner and retention remove some)."""
    held = {
        (record.partition, record.offset)
        for partition in range(world.broker.partition_count(INPUT))
        for record in world.broker.records(INPUT, partition)
    }
    return lambda record: (record.partition, record.offset) in held


def _unread_seqs(world: World) -> dict[tuple[bytes, str], set[int]]:
    """``(key, producer) -> seqs`` of the input records the cleaner removed before the app's
    group read past them (``Events.unread_compacted``)."""
    unread = world.events.unread_compacted
    seqs: dict[tuple[bytes, str], set[int]] = defaultdict(set)
    for record, producer, seq, _kind in _written(world):
        if (record.partition, record.offset) in unread:
            assert record.key is not None
            seqs[(record.key, producer)].add(seq)
    return seqs
