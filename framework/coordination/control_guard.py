"""Refusing a control log that is shorter than what the app's own traces prove existed.

Everything a processor does follows from its app's control log. If that topic is deleted and
created again (or restored from an old copy), a fresh start would write a new app definition
with generation 0 and processors would take back partitions whose state they gave away. The
app leaves traces that prove how far its log once went:

- the consumer group (group id = ``app_id``) has committed offsets once any record was
  processed;
- each processor's database holds its input offsets and, noted by ``remember``, the highest
  scale generation it saw and how far it read the log.

``check_history`` refuses (``ControlLogLostError``, naming the topic, the proof and the fix)
when the log has no app definition although such traces exist, or when the log's generation
(in force or in progress) or its end offset is below what the processor's database noted.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from framework.config import AppConfig
from framework.errors import SplitstateError
from framework.kafka import Kafka
from rebalance.control import ControlState
from statestore import ProcessorDatabase, processor_path

__all__ = [
    "GENERATION_SCOPE",
    "OFFSET_SCOPE",
    "ControlLogLostError",
    "check_history",
    "log_generation",
    "remember",
]

#: ``progress/<scope>/<control topic>/0`` in a processor's database: the highest generation
#: it saw, and the control-log offset it had read to.
GENERATION_SCOPE = "control-generation"
OFFSET_SCOPE = "control-offset"


class ControlLogLostError(SplitstateError):
    """The control log lacks records that the app's state or consumer group prove existed."""


def log_generation(state: ControlState) -> int | None:
    """The highest generation the log reached: in force, or started by a scale."""
    found = [g.generation for g in (state.generation, state.scale) if g is not None]
    return max(found) if found else None


def remember(database: ProcessorDatabase, topic: str, state: ControlState, offset: int) -> None:
    """Note in ``database`` that the log of ``topic`` was read to ``offset`` into ``state``."""
    generation = log_generation(state)
    seen_generation, seen_offset = _seen(database, topic)
    higher = generation is not None and (seen_generation is None or generation > seen_generation)
    further = offset > 0 and (seen_offset is None or offset > seen_offset)
    if not (higher or further):
        return
    batch = database.begin()
    if higher:
        assert generation is not None
        batch.set_progress(GENERATION_SCOPE, topic, 0, generation)
    if further:
        batch.set_progress(OFFSET_SCOPE, topic, 0, offset)
    batch.commit()


def check_history(
    kafka: Kafka,
    config: AppConfig,
    control: ControlState,
    end_offset: int,
    positions: Iterable[tuple[str, int]],
    *,
    processor: int | None = None,
) -> None:
    """Raise ``ControlLogLostError`` when the log is shorter than the app's traces prove.

    ``kafka``: where the consumer group's offsets are read; ``positions``: the input
    partitions (for the group's offsets); ``processor``: whose database to compare the log's
    generation and end offset with (``None``: none).
    """
    topic = config.control_topic
    if control.app is None:
        proofs = [*_group_proof(kafka, config, positions), *_local_proofs(config, topic)]
        if proofs:
            raise ControlLogLostError(
                f"control log {topic!r} has no app definition (it is empty, or was deleted "
                f"and created again), but app {config.app_id!r} has run: "
                f"{'; '.join(proofs)}. Starting from it would redefine the app at generation 0 "
                "and give partitions back to processors that deleted their keys. Fix: restore "
                f"{topic!r} with every record, or deploy under a new app_id. To start this app "
                "over on purpose, stop its processors, delete consumer group "
                f"{config.app_id!r} and move its state directories aside."
            )
        return
    if processor is None:
        return
    path = processor_path(config.app_state_dir, processor)
    seen = _read_seen(config, path, topic)
    if seen is None:
        return
    seen_generation, seen_offset = seen
    generation = log_generation(control)
    problems = []
    if seen_generation is not None and (generation is None or generation < seen_generation):
        problems.append(
            f"processor {processor} has seen generation {seen_generation} (its state in "
            f"{path}), but the log reaches generation {generation}"
        )
    if seen_offset is not None and end_offset < seen_offset:
        problems.append(
            f"processor {processor} read the log up to offset {seen_offset}, but it ends at "
            f"{end_offset}"
        )
    if problems:
        raise ControlLogLostError(
            f"control log {topic!r} is shorter than what it once held: {'; '.join(problems)}. "
            "It was deleted and created again, or restored from an old copy; acting on it "
            "would undo scales the processors already made. Fix: restore "
            f"{topic!r} with every record, or deploy under a new app_id."
        )


def _seen(database: ProcessorDatabase, topic: str) -> tuple[int | None, int | None]:
    generation = database.progress(GENERATION_SCOPE).get((topic, 0))
    offset = database.progress(OFFSET_SCOPE).get((topic, 0))
    return generation, offset


def _read_seen(config: AppConfig, path: Path, topic: str) -> tuple[int | None, int | None] | None:
    database = _open(config, path)
    if database is None:
        return None
    try:
        return _seen(database, topic)
    finally:
        database.close()


def _open(config: AppConfig, path: Path) -> ProcessorDatabase | None:
    """``path``'s database of this app, read-only; ``None`` when there is none."""
    if not (path / "CURRENT").exists():
        return None
    database = ProcessorDatabase.open_read_only(path)
    if database.identity.app_id != config.app_id:
        database.close()
        return None  # another app's state: opening it for real will refuse
    return database


def _group_proof(
    kafka: Kafka, config: AppConfig, positions: Iterable[tuple[str, int]]
) -> list[str]:
    wanted = list(positions)
    if not wanted:
        return []
    with kafka.consumer(config.app_id) as consumer:
        committed = consumer.committed(wanted)
    found = [f"{t}[{p}]@{offset}" for (t, p), offset in committed.items()]
    if not found:
        return []
    more = f" and {len(found) - 8} more" if len(found) > 8 else ""
    return [
        f"its consumer group {config.app_id!r} has committed offsets ({', '.join(found[:8])}{more})"
    ]


def _local_proofs(config: AppConfig, topic: str) -> list[str]:
    state_dir = config.app_state_dir
    if not state_dir.is_dir():
        return []
    proofs = []
    for path in sorted(state_dir.glob("processor-*")):
        if not path.is_dir():
            continue
        database = _open(config, path)
        if database is None:
            continue
        try:
            processor = database.identity.processor
            offsets = sorted(database.offsets().items())
            generation, offset = _seen(database, topic)
        finally:
            database.close()
        where = f"processor {processor}'s state in {path.resolve()}"
        if offsets:
            shown = ", ".join(f"{t}[{p}]@{o}" for (t, p), o in offsets[:8])
            proofs.append(f"{where} holds input offsets ({shown})")
        elif offset is not None:
            proofs.append(f"{where} read this log up to offset {offset} (generation {generation})")
    return proofs
