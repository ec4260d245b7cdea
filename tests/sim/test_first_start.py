"""A new app's first start with more processors than ``initial_processors`` on an input
that another app already grew: the processors split off by that growth would own partitions
whose keys' earlier records sit in parent partitions other processors read, and a first
start builds nothing from those. It is refused up front, naming the fix (start with ``B``
processors, then scale: the catch-up replays the parents), instead of starting processors
that then stop as if their state directory had been lost."""

from __future__ import annotations

import random
from pathlib import Path
from unittest import mock

import pytest

from framework import App
from framework.bootstrap.backfill import backfill
from framework.config import ConfigError
from framework.coordination.control_log import ControlLog
from framework.coordination.layout import prepare_app
from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.kafka import TopicSpec
from framework.runtime.loop import ProcessorRuntime
from rebalance import TopicHistory
from statestore.snapshot_store import SnapshotStore
from tests.clocks import ManualClock
from tests.sim.app import INPUT, OUTPUT, make_app
from tests.sim.broker import Broker
from tests.sim.kafka import MemoryKafka


def _grown_input(thresholds: dict[int, int] | None) -> MemoryKafka:
    """The input grown from 2 to 4 partitions by another app (``thresholds``: each new
    partition's threshold in its parent, ``None``: the growth recorded none yet), with records
    in the parents below the thresholds and in the new partitions after them."""
    kafka = MemoryKafka(Broker(random.Random(1)), ManualClock())
    kafka.create_topics([TopicSpec(INPUT, 2), TopicSpec(OUTPUT, 2)])
    kafka.broker.grow(INPUT, 4)
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    history = TopicHistory.of(INPUT, [2, 4], thresholds or {})
    registry.write(TopicEntry(history, lease_ms=2000, delivery_timeout_ms=1000))
    registry.register(OUTPUT, 2)
    for partition in range(4):
        for seq in range((thresholds or {}).get(partition + 2, 3)):
            record = {"key": f"k{partition}".encode(), "value": f"p:{seq + 1}".encode()}
            kafka.broker.append(
                (INPUT, partition), {**record, "headers": (), "timestamp_ms": 0, "origin": "p"}
            )
    return kafka


def _new_app(tmp_path: Path, processors: int) -> App:
    app = make_app(
        tmp_path, partitions=2, initial_processors=2, max_records=5, lease_ms=2000, ready_lag=0
    )
    app.configure(app.config.model_copy(update={"processors": processors}))
    return app


def _app_definition_written(kafka: MemoryKafka, app: App) -> bool:
    return ControlLog(kafka, app.config.control_topic).read().app is not None


def test_a_new_app_starting_above_b_on_a_grown_input_is_refused_naming_the_fix(
    tmp_path: Path,
) -> None:
    kafka = _grown_input({2: 3, 3: 2})
    app = _new_app(tmp_path, processors=4)
    with pytest.raises(ConfigError) as refused:
        ProcessorRuntime(app, 2, kafka=kafka).run()
    text = str(refused.value)
    assert "4 processors" in text and "initial_processors (2)" in text
    assert "sim-in[2]" in text and "sim-in[0] up to offset 3" in text
    assert "sim-in[3]" in text and "sim-in[1] up to offset 2" in text
    assert "processors: 2" in text and "splitstate scale MODULE:APP --processors 4" in text
    assert "lost state directory" not in text
    # nothing recorded: the first start with `processors: 2` the message asks for works
    assert not _app_definition_written(kafka, app)
    layout = prepare_app(_new_app(tmp_path, processors=2), kafka, 0)
    assert layout.processors == 2 and layout.inputs[INPUT].partitions == 4


def test_a_growth_without_recorded_thresholds_is_refused_too(tmp_path: Path) -> None:
    """Until the growth records its thresholds the parents may hold the new partitions'
    keys' records: a first start above ``B`` cannot know it builds them all."""
    kafka = _grown_input(None)
    with pytest.raises(ConfigError, match=r"sim-in\[0\] up to the growth's threshold"):
        prepare_app(_new_app(tmp_path, processors=4), kafka, 3)


def test_a_grown_input_whose_parents_held_nothing_before_the_growth_starts_above_b(
    tmp_path: Path,
) -> None:
    kafka = _grown_input({2: 0, 3: 0})
    layout = prepare_app(_new_app(tmp_path, processors=4), kafka, 2)
    assert layout.processors == 4


def test_a_backfill_builds_every_key_from_its_whole_history_so_it_may_start_above_b(
    tmp_path: Path,
) -> None:
    kafka = _grown_input({2: 3, 3: 2})
    app = _new_app(tmp_path, processors=4)
    layout = prepare_app(app, kafka, backfilling=True)
    assert layout.processors == 4 and _app_definition_written(kafka, app)
    # the processors' later starts find the app recorded and are not refused
    assert prepare_app(app, kafka, 2).processors == 4


def test_a_backfill_that_cannot_delete_the_old_snapshots_loads_no_state(tmp_path: Path) -> None:
    """The snapshots hold the state from before a backfill; a backfill that cannot delete
    them (the store unreachable) stops before it loads any state, so no processor can later
    restore the old state under the new (helper-6's review: it loaded the state first)."""
    kafka = _grown_input({2: 3, 3: 2})
    app = make_app(
        tmp_path,
        partitions=2,
        initial_processors=2,
        max_records=5,
        lease_ms=2000,
        ready_lag=0,
        snapshots=True,
    )
    built = mock.Mock()
    built.files.return_value = {}
    built.targets = {j: mock.Mock(offsets={}) for j in range(2)}
    with (
        mock.patch("framework.bootstrap.backfill.build_state", return_value=built),
        mock.patch.object(SnapshotStore, "processors", return_value=[0]),
        mock.patch.object(SnapshotStore, "delete_processor", side_effect=OSError("unreachable")),
        pytest.raises(OSError, match="unreachable"),
    ):
        backfill(app, kafka=kafka)
    state_dir = app.config.app_state_dir
    assert not any((state_dir / f"processor-{j}").exists() for j in range(2))
