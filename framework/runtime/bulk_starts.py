"""How a receiver's catch-up starts (``start_catch_up``), and how it gets its gained keys in
bulk, per ``bootstrap`` in the config: ``snapshot`` (its sources' snapshots, the default),
``spark`` (a Spark job over history or an archive) or ``replay`` (nothing: the catch-up reads
from the beginning)."""

from __future__ import annotations

import logging

from framework.app import App
from framework.bootstrap.child_process import BootstrapRun
from framework.clock import Clock
from framework.coordination.layout import AppLayout
from framework.kafka import Kafka
from framework.processing import RecordProcessor
from framework.runtime.catchup import BootstrapStarter, CatchUp
from framework.runtime.catchup_apply import BulkBuild, SparkBuild
from framework.runtime.faults import maybe_crash
from framework.snapshots.transfer import SnapshotTransfer
from framework.snapshots.transfer_progress import transfer_directory
from rebalance.control import ControlState, Scale
from rebalance.positions import OffsetRange, Position
from statestore import ProcessorDatabase
from statestore.snapshot_store import SnapshotStore

__all__ = ["bulk_starter", "start_catch_up"]

log = logging.getLogger("framework.runtime.catchup")


def start_catch_up(
    app: App,
    processor: int,
    scale: Scale,
    *,
    state: ControlState,
    layout: AppLayout,
    kafka: Kafka,
    database: ProcessorDatabase,
    records: RecordProcessor,
) -> CatchUp:
    """Processor ``processor``'s catch-up for ``scale`` (``state``: the control state), with
    its bulk build per the config."""
    config = app.config
    assert state.app is not None
    return CatchUp(
        processor,
        state.app.initial_processors,
        scale,
        kafka=kafka,
        group_id=config.app_id,
        database=database,
        records=records,
        histories={name: e.history for name, e in layout.inputs.items()},
        crash_limit=config.crash_limit,
        read_ahead=config.scaling.catchup_batch,
        at_least_once=config.processing_guarantee == "at-least-once",
        bootstrap=bulk_starter(app, processor, scale, database, kafka.clock, epoch=state.app.epoch),
    )


def bulk_starter(
    app: App,
    processor: int,
    scale: Scale,
    database: ProcessorDatabase,
    clock: Clock,
    *,
    epoch: str | None = None,
) -> BootstrapStarter | None:
    """What builds processor ``processor``'s gained keys in ``scale`` (``None``: replay)."""
    config = app.config
    if config.bootstrap == "spark":

        def spark(catchup: CatchUp) -> BulkBuild | None:
            ranges = _spark_ranges(catchup)
            if ranges is None:
                return None
            run = BootstrapRun.start(
                app,
                processor=processor,
                generation=scale.generation,
                processors=scale.new_processors,
                gained_from=(scale.old_processors, catchup.sources),
                ranges=ranges,
                covers=sorted(catchup.bounds),
            )
            flag = f"{catchup.scope}-bootstrapped"
            return SparkBuild(run, database, processor, catchup.scope, flag)

        return spark
    if config.bootstrap == "snapshot":

        def snapshot(catchup: CatchUp) -> BulkBuild | None:
            pending = [h for h in scale.incoming(processor) if h.source in catchup.sources]
            return SnapshotTransfer(
                processor,
                scale.generation,
                scope=catchup.scope,
                loaded_flag=f"{catchup.scope}-bootstrapped",
                handoffs={h.source: frozenset(h.partitions) for h in pending},
                topics=catchup.topics,
                gained=catchup.gained_ranges,
                database=database,
                store=SnapshotStore(config.snapshot_url, config.app_id),
                work_dir=transfer_directory(config.app_state_dir, processor, scale.generation),
                clock=clock,
                slice_bytes=config.snapshots.slice_bytes,
                fault=lambda point: maybe_crash(point, processor, config.app_state_dir),
                epoch=epoch,
                fallback_seconds=2 * config.snapshots.interval_seconds,
                released=lambda: catchup.released,
            )

        return snapshot
    return None


def _spark_ranges(catchup: CatchUp) -> dict[Position, OffsetRange] | None:
    """What Spark should fold: every S2 partition from its start up to T1 (S1) or its
    threshold (ancestors); ``None`` when an ancestor's threshold is not known yet."""
    bounds = catchup.bounds
    unknown = [p for p in bounds if p not in catchup.s1 and bounds[p] is None]
    if unknown:
        log.warning(
            "processor %d: thresholds of %s are not recorded yet; catching up by replay",
            catchup.processor,
            sorted(unknown),
        )
        return None
    catchup.refresh(force=True)
    return {position: OffsetRange(0, catchup.limit(position) or 0) for position in bounds}
