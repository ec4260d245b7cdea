"""Starting an app against Kafka: check the topics, the registry and the control log agree.

On the very first start this records the app's fixed parameters (each input topic's ``N`` and
key hash in the topic registry; ``B`` and the inputs in the control log, with generation 0).
Every later start checks the config against them and refuses, naming the fix, when they
contradict. A first start with more processors than ``B`` is refused when an earlier growth
split off partitions whose keys' earlier records sit in other processors' partitions (start
with ``B``, then scale). It also refuses when the registry or the control log would let
Kafka delete records, and when the control log is empty or shorter than the app's consumer
group or the processor's state prove it was (``framework.coordination.control_guard``): it
never writes a fresh app definition over a lost one.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace

from framework.app import App
from framework.config import AppConfig, ConfigError
from framework.coordination.app_topics import check_input_retention, input_and_output_specs
from framework.coordination.control_guard import ControlLogLostError, check_history
from framework.coordination.control_log import ControlLog
from framework.coordination.progress_reports import progress_topic_spec
from framework.coordination.registry import REGISTRY_TOPIC, TopicEntry, TopicRegistry
from framework.kafka import Kafka, KafkaIOError, TopicSpec, check_retention
from framework.repartition import written_topics
from framework.tables.topics import check_table_topics, table_topic_configs
from rebalance import TopicHistory, bucket, check_layout
from rebalance.control import AppDefinition, ControlState, Generation

log = logging.getLogger(__name__)

__all__ = ["AppLayout", "prepare_app"]


@dataclass(frozen=True)
class AppLayout:
    """What a processor needs to know about its app's topics and processors."""

    definition: AppDefinition
    processors: int
    inputs: dict[str, TopicEntry]
    outputs: dict[str, TopicEntry]
    control: ControlState

    @property
    def initial_processors(self) -> int:
        """``B``."""
        return self.definition.initial_processors

    def input_positions(self) -> list[tuple[str, int]]:
        """Every input partition the app reads: each topic's universe per the registry
        (``TopicHistory.created``: every partition ever created, deleted ones too)."""
        return [
            (name, p) for name, entry in self.inputs.items() for p in range(entry.history.created)
        ]

    def fixed_parameters(self) -> dict[str, object]:
        """What a processor's state records and refuses to change."""
        return {
            "initial_processors": self.definition.initial_processors,
            "inputs": dict(sorted(self.definition.inputs.items())),
            "key_hash": self.definition.key_hash,
        }


#: how often the control log is read before it is reported lost
_LOG_READS = 3
#: how long a start waits for partitions a growth recorded but has not created yet
_GROWTH_WAIT_SECONDS = 30.0


def prepare_app(
    app: App, kafka: Kafka, processor: int | None = None, *, backfilling: bool = False
) -> AppLayout:
    """Check and (first time) record the app's layout; raise ``ConfigError`` on contradictions.

    ``kafka``: the port to the app's cluster; ``processor``: the processor about to
    run here, whose state the control log must not be behind (see
    ``framework.coordination.control_guard``); ``backfilling``: the caller builds every
    processor's state from the inputs' whole history, so a first start may run processors
    that own partitions split off from other processors' partitions (``_check_first_start``).
    """
    app.check()
    config = app.config
    kafka.prepare_appends()  # a first start appends to the registry and the control log
    names = [t.topic for t in config.inputs] + [t.topic for t in config.outputs]
    counts = kafka.partition_counts(names)
    missing = [name for name in names if name not in counts]
    if missing and config.auto_create_topics:
        check_input_retention(config)
        made = input_and_output_specs(config, table_topic_configs(app))
        for name in kafka.create_topics([spec for spec in made if spec.name in missing]):
            log.info("created topic %s (auto_create_topics)", name)
        counts = kafka.partition_counts(names)
        missing = [name for name in names if name not in counts]
    if missing:
        raise ConfigError(
            f"topics {missing} do not exist. Fix: `splitstate topics create "
            f"MODULE:APP` creates the app's topics with the configured partition counts "
            "(or leave auto_create_topics on: a start creates them)."
        )
    if app.tables:  # (their topics keep what a rebuild from the log reads)
        check_table_topics(app, kafka.topic_configs([t.topic for t in config.inputs]))
    registry = TopicRegistry(kafka)
    control_log = ControlLog(kafka, config.control_topic)
    # the dead letters, the registry and the control log, created together where missing
    kafka.create_topics(
        [TopicSpec(config.dead_letters, 1), registry.topic_spec(), control_log.topic_spec()]
    )
    _create_progress_topic(kafka, config)
    check_retention(kafka, [REGISTRY_TOPIC, config.control_topic])
    known = registry.read()
    topics = {t.topic: t for t in [*config.inputs, *config.outputs]}
    new = [
        TopicEntry(
            TopicHistory.of(name, [counts[name]]),
            config.key_hash,
            topics[name].producer_lease_ms,
            topics[name].producer_delivery_timeout_ms,
        )
        for name in dict.fromkeys(names)
        if name not in known
    ]
    # registered in one append (the registry is read again just before it)
    registered = registry.register_all(new) if new else {}
    entries: dict[str, TopicEntry] = {}
    for name in names:
        entry = registered[name] if name in registered else known[name]
        if entry.key_hash != config.key_hash:
            raise ConfigError(
                f"topic {name!r} is registered with key hash {entry.key_hash!r} but the config "
                f"says {config.key_hash!r}. Fix: use {entry.key_hash!r}."
            )
        if counts[name] < entry.history.created:
            counts[name] = _await_growth(kafka, name, counts[name], entry.history.created)
        entries[name] = entry

    positions = [
        (t.topic, p) for t in config.inputs for p in range(entries[t.topic].history.created)
    ]
    control = _read_checked(kafka, config, control_log, positions, processor)
    wanted = AppDefinition(
        app_id=config.app_id,
        initial_processors=config.initial_processors,
        inputs={t.topic: entries[t.topic].initial_partitions for t in config.inputs},
        key_hash=config.key_hash,
    )
    if control.app is None:
        processors = config.processor_count
        _check_layouts(config, wanted, entries, processors)
        if not backfilling:
            _check_first_start(config, entries, processors)
        first = replace(wanted, epoch=uuid.uuid4().hex)
        control_log.append(first.to_record(), Generation(0, processors).to_record())
        control = control_log.read()
    assert control.app is not None
    _check_against_log(config, wanted, control.app)
    # The control log, not the config, says how many processors run: a changed `processors`
    # is applied as a scale (`splitstate scale`, or the supervisor watching the config).
    processors = control.processors or config.processor_count
    _check_layouts(config, control.app, entries, processors)
    inputs = {t.topic: entries[t.topic] for t in config.inputs}
    # (what the app's functions write: its outputs and its group_by's internal topics)
    outputs = {topic: entries[topic] for topic in written_topics(app)}
    return AppLayout(control.app, processors, inputs, outputs, control)


def _await_growth(kafka: Kafka, name: str, count: int, recorded: int) -> int:
    """Wait for topic ``name`` to have the ``recorded`` partitions of the registry: a growth
    records the count before it creates the partitions. Raise ``ConfigError`` if it does
    not within ``_GROWTH_WAIT_SECONDS``."""
    clock = kafka.clock
    deadline = clock.monotonic() + _GROWTH_WAIT_SECONDS
    while count < recorded and clock.monotonic() < deadline:
        clock.sleep(1.0)
        count = kafka.partition_counts([name]).get(name, count)
    if count < recorded:
        raise ConfigError(
            f"topic {name!r} has {count} partitions but the registry recorded {recorded} "
            f"(waited {_GROWTH_WAIT_SECONDS:.0f}s for them); partitions cannot shrink. Fix: if "
            f"`splitstate expand` to {recorded} was interrupted, run it again to finish the "
            f"growth; if the topic was deleted and created again, recreate it with at least "
            f"{recorded} partitions."
        )
    return count


def _read_checked(
    kafka: Kafka,
    config: AppConfig,
    control_log: ControlLog,
    positions: list[tuple[str, int]],
    processor: int | None,
) -> ControlState:
    """The control log's state, refused (``check_history``) when shorter than the
    app's traces prove. The traces are read after the log, so a log read just before
    another processor's first start landed (or answered late) looks lost: it is read again,
    a second apart, and refused only if it still is (traces only grow, so a lost log stays
    lost)."""
    for attempt in range(1, _LOG_READS + 1):
        end_offset = control_log.end_offset()
        control = control_log.read()
        try:
            check_history(kafka, config, control, end_offset, positions, processor=processor)
        except ControlLogLostError:
            if attempt == _LOG_READS:
                raise
            kafka.clock.sleep(1.0)
            continue
        return control
    raise AssertionError("unreachable")


def _check_layouts(
    config: AppConfig,
    definition: AppDefinition,
    entries: dict[str, TopicEntry],
    processors: int,
) -> None:
    for name in definition.inputs:
        entry = entries[name]
        try:
            check_layout(
                entry.initial_partitions,
                definition.initial_processors,
                entry.partitions,
                processors,
            )
        except ValueError as error:
            raise ConfigError(f"app {config.app_id!r}, input topic {name!r}: {error}") from None


def _check_first_start(config: AppConfig, entries: dict[str, TopicEntry], processors: int) -> None:
    """Refuse a first start whose processors would own partitions split off by an earlier
    growth (another app's `expand`) from partitions another processor owns, while those parents may
    hold the split keys' earlier records: nothing at a first start builds a processor's
    state from another's partitions (a scale's catch-up does), so those keys' state would
    lack them. Starting with ``B`` processors and then scaling is exact."""
    b = config.initial_processors
    if processors == b:
        return
    missing: list[str] = []
    for topic in config.inputs:
        entry = entries[topic.topic]
        for partition in range(entry.initial_partitions, entry.history.created):
            owner = bucket(partition, b, processors)
            elsewhere = [
                f"{read.topic}[{read.partition}] up to "
                + (
                    "the growth's threshold (not recorded yet)"
                    if read.end_offset is None
                    else f"offset {read.end_offset}"
                )
                + f" (processor {bucket(read.partition, b, processors)})"
                for read in entry.history.key_history(partition)[:-1]
                if bucket(read.partition, b, processors) != owner and read.end_offset != 0
            ]
            if elsewhere:
                missing.append(
                    f"processor {owner} would own {topic.topic}[{partition}], whose keys' "
                    f"earlier records are in {', '.join(elsewhere)}"
                )
    if missing:
        raise ConfigError(
            f"app {config.app_id!r} is starting for the first time with {processors} "
            f"processors, more than its initial_processors ({b}), on inputs that already "
            f"grew: {_listed(missing)}. A first start builds no processor's state from "
            "another processor's partitions, so those keys' state would be wrong. Fix: start "
            f"the app with processors: {b} (its initial_processors), then scale with "
            f"`splitstate scale MODULE:APP --processors {processors}` (the catch-up replays "
            "those records), or build every processor's state first with `splitstate "
            f"backfill MODULE:APP --processors {processors}`."
        )


def _listed(items: list[str], most: int = 4) -> str:
    shown = "; ".join(items[:most])
    return shown if len(items) <= most else f"{shown}; and {len(items) - most} more"


def _check_against_log(config: AppConfig, wanted: AppDefinition, recorded: AppDefinition) -> None:
    if wanted.initial_processors != recorded.initial_processors:
        raise ConfigError(
            f"initial_processors is {wanted.initial_processors} in the config but app "
            f"{config.app_id!r} was started with {recorded.initial_processors} (its control "
            f"log). It can never change. Fix: set initial_processors: "
            f"{recorded.initial_processors}, or deploy under a new app_id."
        )
    if set(wanted.inputs) != set(recorded.inputs):
        raise ConfigError(
            f"the config's input topics {sorted(wanted.inputs)} differ from the ones app "
            f"{config.app_id!r} was started with {sorted(recorded.inputs)} (its control log). "
            "Fix: restore the inputs, or deploy the new inputs under a new app_id."
        )
    for topic, initial in sorted(wanted.inputs.items()):
        if initial != recorded.inputs[topic]:
            raise ConfigError(
                f"input topic {topic!r} has initial partition count {initial} in the topic "
                f"registry ({REGISTRY_TOPIC}) but {recorded.inputs[topic]} in the control log "
                f"of app {config.app_id!r}: the registry's record of the topic was lost or "
                "rewritten, and keys would be placed on other processors than the app's state "
                f"holds. Fix: restore the registry's record of {topic!r} (initial_partitions "
                f"{recorded.inputs[topic]}), or deploy under a new app_id."
            )
    if wanted.key_hash != recorded.key_hash:
        raise ConfigError(
            f"key_hash {wanted.key_hash!r} differs from the app's recorded "
            f"{recorded.key_hash!r}. Fix: set key_hash: {recorded.key_hash}."
        )


def _create_progress_topic(kafka: Kafka, config: AppConfig) -> None:
    """Create the progress reports' topic where missing; a refusal (no CreateTopics right, a
    topic policy) is a warning only: reports inform ``status`` and decide nothing."""
    try:
        kafka.create_topics([progress_topic_spec(config.progress_topic)])
    except KafkaIOError as error:
        log.warning(
            "could not create %r (%s): processors' progress reports are not written, so "
            "`splitstate status` shows only processors on its own host. Fix: create it "
            "(`splitstate topics create`, or by hand: compacted, one partition).",
            config.progress_topic,
            error,
        )
