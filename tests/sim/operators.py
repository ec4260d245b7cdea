"""The simulation's operators: scale, abort and expand commands run as an operator would,
asking again while another scale, a change of the input's partition count, a broker outage
or a control-log record no reader can read is in the way, and finishing a change they
started."""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.config import ConfigError
from framework.coordination.control_log import ControlLog, ControlRecordError
from framework.coordination.registry import TopicRegistry
from framework.coordination.scaling import abort_scale, request_scale
from framework.errors import SplitstateError
from framework.growth.expand import ExpandError, expand_topic
from framework.kafka import KafkaIOError
from rebalance.control import Scale
from tests.sim.app import INPUT
from tests.sim.kafka import MemoryKafka
from tests.sim.plan import SHRINK_DRAWS, Operation
from tests.sim.scheduler import Party

if TYPE_CHECKING:
    from tests.sim.world import World

__all__ = ["kill_operator", "start_operator", "start_racer"]


def start_operator(
    world: World, operations: tuple[Operation, ...], name: str = "operator", pause: float = 0.0
) -> None:
    """An operator doing ``operations`` in order (refusals are noted, not errors), after
    ``pause`` seconds; a second one (``rival``) races the first. Killed (``kill_operator``),
    it is started again with the operation it was at and those after it."""

    def body(port: MemoryKafka, party: Party) -> None:
        world.clock.sleep(pause)
        for index, operation in enumerate(operations):
            left[party] = operations[index:]
            world.clock.sleep(operation.delay)
            _operate(world, port, operation)
        left[party] = ()
        _finish_growth(world, port)

    left = world.operations_left
    party = world.spawn(name, body)
    left[party] = operations
    world.operators.append(party)


def kill_operator(world: World, party: Party, why: str) -> None:
    """Kill an operator (or a racer) between two of its calls; an operator starts again
    0.5-5 seconds later with what it had left to do (its command run again resumes the
    change it was at), a racer does not (``status`` makes someone finish its change)."""
    if not party.runnable:
        return
    world.scheduler.kill(party)
    world.events.kills.append(f"t={world.clock.monotonic():.2f} {party.name} {why}")
    operations = world.operations_left.pop(party, None)
    if operations is not None and party.name != "racer":
        pause = world.rng.uniform(0.5, 5.0)
        start_operator(world, operations, party.name, pause)


def _operate(world: World, port: MemoryKafka, operation: Operation) -> None:
    for watcher in world.operation_watchers:
        watcher(operation)
    try:
        if operation.kind == "scale":
            _scale(world, port, operation.value)
        elif operation.kind == "abort":
            abort_scale(world.app, "the simulation's operator", kafka=port)
        else:
            _expand_when_no_scale_runs(world, port, operation.value)
    except (SplitstateError, KafkaIOError) as error:
        world.note_refusal(error)
        world.events.refusals.append(f"{operation}: {type(error).__name__}: {error}")


def start_racer(world: World, operation: Operation) -> None:
    """An operator who tries ``operation`` once, at once (racing another operator's
    command), then finishes a growth it started."""

    def body(port: MemoryKafka, _party: Party) -> None:
        try:
            if operation.kind == "scale":
                accepted = request_scale(world.app, operation.value, kafka=port)
                _check_report(world, operation.value, accepted)
            else:
                _expand(world, port, operation.value)
        except (SplitstateError, KafkaIOError) as error:
            world.note_refusal(error)
            world.events.refusals.append(f"racing {operation}: {type(error).__name__}: {error}")
        _finish_growth(world, port)

    world.operators.append(world.spawn("racer", body))


def _check_report(world: World, processors: int, accepted: Scale) -> None:
    """Note a scale command that reported another scale as its own."""
    if accepted.new_processors != processors:
        world.events.false_reports.append(
            f"t={world.clock.monotonic():.2f} a scale to {processors} was reported "
            f"accepted as generation {accepted.generation}, a scale to "
            f"{accepted.new_processors}"
        )


def _scale(world: World, port: MemoryKafka, processors: int) -> None:
    """Ask for a scale, again a while later while another scale or a growth is in the
    way, or the control log holds a record no reader can read (as an operator would,
    who waits for its fix: ``tests/sim/junk.py``)."""
    for _ in range(30):
        try:
            _check_report(world, processors, request_scale(world.app, processors, kafka=port))
            return
        except (KafkaIOError, ControlRecordError) as error:
            world.note_refusal(error)
            world.clock.sleep(1.0)
        except ConfigError as error:
            if not any(why in str(error) for why in ("in progress", "growing", "shrinking")):
                raise
            world.clock.sleep(1.0)
    request_scale(world.app, processors, kafka=port)


def _expand(world: World, port: MemoryKafka, partitions: int) -> None:
    """Change the input's partition count, again a while later when the broker failed it
    (``status`` would show the change unfinished) or the control log holds a record no
    reader can read."""
    control = ControlLog(port, world.app.config.control_topic)
    entry = TopicRegistry(port).read().get(INPUT)
    shrink = entry is not None and partitions < entry.partitions and entry.growth is None
    if shrink and not SHRINK_DRAWS:
        # the operator is refused as `expand` refused a lower count before shrinks existed
        world.events.refusals.append(f"expand {partitions}: a shrink, not drawn")
        return
    for _ in range(10):
        try:
            expand_topic(port, INPUT, partitions, control=control, report=lambda _line: None)
            return
        except (KafkaIOError, ControlRecordError) as error:
            world.note_refusal(error)
            world.clock.sleep(1.0)
    expand_topic(port, INPUT, partitions, control=control, report=lambda _line: None)


def _expand_when_no_scale_runs(world: World, port: MemoryKafka, partitions: int) -> None:
    """``_expand``, asked again a while later while a scale is in progress (as ``_scale``
    asks again while a change is), unless a receiver of that scale stopped: it waits for the
    operator's abort then (``tests/sim/driver.py``), so this operator goes on."""
    for _ in range(30):
        try:
            _expand(world, port, partitions)
            return
        except ExpandError as error:
            scale = world.control().scaling
            if "is scaling to" not in str(error) or (scale is not None and scale.stopped):
                raise
            world.clock.sleep(1.0)
    _expand(world, port, partitions)


def _finish_growth(world: World, port: MemoryKafka) -> None:
    """Run ``expand`` again while a growth it started is unfinished (as an operator
    told by ``status`` would)."""
    for _ in range(50):
        entry = TopicRegistry(port).read().get(INPUT)
        growing = world.control().growth
        if entry is None or (entry.growth is None and not entry.pending() and not growing):
            return
        target = entry.partitions if growing is None else growing.partitions
        try:
            _expand(world, port, target)
        except (SplitstateError, KafkaIOError) as error:
            world.note_refusal(error)
            world.events.refusals.append(f"finishing growth: {type(error).__name__}: {error}")
            world.clock.sleep(1.0)
