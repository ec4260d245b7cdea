"""A processor's Prometheus metrics and health endpoint (``framework.metrics``).

The runtime tests run the real ``ProcessorRuntime`` against the simulation's in-memory Kafka
(``tests/sim``) with ``metrics.port: 0`` (any free port): they read the processor's own
registry after a few batches, and its endpoint over HTTP while the run runs.
"""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from framework import App
from framework.config import AppConfig, ConfigError, MetricsConfig
from framework.coordination.scaling import request_scale
from framework.metrics import (
    CatchUpView,
    HandoffView,
    MetricsPortError,
    MetricsServer,
    Observation,
    ProcessorMetrics,
)
from framework.metrics.ports import PORT_VARIABLE, child_environment, processor_port
from framework.runtime.loop import ProcessorRuntime, RuntimeStats
from statestore import ProcessorDatabase
from tests.sim.app import INPUT
from tests.sim.consumer import MemoryConsumer
from tests.sim.one_key import one_key_world

ROOT = Path(__file__).resolve().parents[2]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of a Prometheus text exposition, by name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` whose labels are exactly ``app``/``processor`` plus ``labels``."""
    wanted = frozenset({"app": "sim", "processor": labels.pop("processor", "0"), **labels}.items())
    assert (name, wanted) in found, f"no {name}{dict(wanted)} in {sorted(n for n, _ in found)}"
    return found[(name, wanted)]


def get(url: str) -> tuple[int, str]:
    """Status and body of a GET (an error status too)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - http only
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def with_metrics(app: App, **settings: object) -> App:
    """``app`` with its metrics endpoint on (any free port unless given)."""
    metrics = MetricsConfig.model_validate({"port": 0, **settings})
    app.configure(app.config.model_copy(update={"metrics": metrics}))
    return app


class Until:
    """``until`` for a run: stop once ``stats.<field>`` reaches ``count``; ``during`` runs
    once (in the loop's thread, while the endpoint serves) when ``stats.<field>`` first
    reaches ``at``."""

    def __init__(
        self,
        field: str,
        count: int,
        at: int | None = None,
        during: Callable[[], None] | None = None,
    ) -> None:
        self.field, self.count, self.at, self.during, self.steps = field, count, at, during, 0

    def __call__(self, stats: RuntimeStats) -> bool:
        self.steps += 1
        assert self.steps < 5_000, f"{getattr(stats, self.field)} of {self.count}"
        reached = int(getattr(stats, self.field))
        if self.during is not None and self.at is not None and reached >= self.at:
            self.during()
            self.during = None
        return reached >= self.count


def test_metrics_are_off_by_default(tmp_path: Path) -> None:
    kafka, app = one_key_world(tmp_path, records=3, seed=1, exactly_once=False)
    runtime = ProcessorRuntime(app, 0, kafka=kafka)
    runtime.run(until=Until("records", 3))
    assert runtime.metrics is None and runtime.server is None


@pytest.mark.parametrize("exactly_once", [False, True])
def test_counters_and_gauges_after_a_few_batches(tmp_path: Path, exactly_once: bool) -> None:
    """12 records in batches of at most 5: every counter agrees with the run's stats, and
    the gauges show partition 0 committed to its end and the processor running; as the run
    ended, the readiness gauge agrees with /readyz (not ready)."""
    kafka, app = one_key_world(tmp_path, records=12, seed=2, exactly_once=exactly_once)
    runtime = ProcessorRuntime(with_metrics(app), 0, kafka=kafka)
    stats = runtime.run(until=Until("records", 12))
    assert runtime.metrics is not None
    found = samples(generate_latest(runtime.metrics.registry).decode())
    at_0 = {"topic": INPUT, "partition": "0"}
    assert value(found, "splitstate_records_total", **at_0) == 12
    assert value(found, "splitstate_outputs_total") == stats.outputs == 12
    assert value(found, "splitstate_dead_letters_total") == 0
    assert value(found, "splitstate_restored_records_total") == 0
    assert value(found, "splitstate_batch_duration_seconds_count") == stats.batches >= 3
    assert value(found, "splitstate_batch_duration_seconds_bucket", le="+Inf") == stats.batches
    assert value(found, "splitstate_committed_offset", **at_0) == 12
    assert value(found, "splitstate_end_offset", **at_0) == 12
    assert value(found, "splitstate_lag_records", **at_0) == 0
    assert value(found, "splitstate_processor_phase", phase="running") == 1
    assert value(found, "splitstate_processor_phase", phase="catching_up") == 0
    assert value(found, "splitstate_ready") == 0
    assert runtime.metrics.readiness() == (False, "the loop has stopped")
    assert value(found, "splitstate_state_size_bytes") > 0
    assert value(found, "splitstate_growth_gates_held") == 0
    assert value(found, "splitstate_lease_fresh") == 1
    assert value(found, "splitstate_catchup_records_total") == 0
    # every series is the processor's: labelled with its app and id
    assert all(("app", "sim") in labels and ("processor", "0") in labels for _, labels in found)


def test_the_endpoint_serves_metrics_and_health_while_the_run_runs(tmp_path: Path) -> None:
    kafka, app = one_key_world(tmp_path, records=20, seed=3, exactly_once=False)
    runtime = ProcessorRuntime(with_metrics(app), 0, kafka=kafka)
    seen: dict[str, tuple[int, str]] = {}

    def scrape() -> None:
        assert runtime.server is not None
        base = f"http://127.0.0.1:{runtime.server.port}"
        for path in ("/metrics", "/healthz", "/readyz", "/nothing"):
            seen[path] = get(base + path)

    runtime.run(until=Until("records", 20, at=5, during=scrape))
    assert seen["/healthz"][0] == 200 and seen["/healthz"][1].startswith("ok: running")
    assert seen["/readyz"] == (200, "ready\n")
    assert seen["/nothing"][0] == 404
    status, text = seen["/metrics"]
    assert status == 200
    assert value(samples(text), "splitstate_records_total", topic=INPUT, partition="0") >= 5
    # stopped with the run: the port is free again
    assert runtime.server is not None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", runtime.server.port))


def test_a_joiner_catching_up_shows_its_lag_and_is_not_ready(tmp_path: Path) -> None:
    """Processor 0 processes 30 records of partition 1 and stops; after a scale to 2,
    processor 1 catches up on them. With the old owner down no RELEASE comes, so the joiner
    stays a receiver: phase catching_up, its handoff READY once caught up, T2 = T1 = 30,
    and ``/readyz`` answers 503 (it is ready only once its handoffs are COMPLETE)."""
    kafka, app = one_key_world(tmp_path, records=0, seed=5, exactly_once=False)
    for seq in range(1, 31):
        record = {"key": b"k", "value": f"p:{seq}".encode(), "headers": ()}
        kafka.broker.append((INPUT, 1), {**record, "timestamp_ms": 0, "origin": "p"})
    ProcessorRuntime(app, 0, kafka=kafka).run(until=Until("records", 30))
    request_scale(app, 2, kafka=kafka)
    joiner = ProcessorRuntime(with_metrics(app), 1, kafka=kafka)
    answers: list[tuple[int, str]] = []

    def readyz() -> None:
        assert joiner.server is not None
        answers.append(get(f"http://127.0.0.1:{joiner.server.port}/readyz"))

    joiner.run(until=Until("replayed", 30, at=1, during=readyz))
    assert joiner.metrics is not None
    found = samples(generate_latest(joiner.metrics.registry).decode())
    at_1 = {"processor": "1", "topic": INPUT, "partition": "1"}
    assert value(found, "splitstate_catchup_t1_offset", **at_1) == 30
    assert value(found, "splitstate_catchup_t2_offset", **at_1) == 30
    assert value(found, "splitstate_catchup_lag_records", **at_1) == 0
    assert value(found, "splitstate_catchup_records_total", processor="1") == 30
    assert value(found, "splitstate_processor_phase", processor="1", phase="catching_up") == 1
    assert value(found, "splitstate_ready", processor="1") == 0
    handoff = {"processor": "1", "generation": "1", "source": "0", "target": "1"}
    phases = {
        phase: value(found, "splitstate_handoff_phase", **handoff, role="target", phase=phase)
        for phase in ("CATCHING_UP", "READY", "COMPLETE")
    }
    assert phases["COMPLETE"] == 0 and phases["CATCHING_UP"] + phases["READY"] == 1
    assert answers and answers[0][0] == 503 and "catching up" in answers[0][1]


def test_a_stuck_loop_turns_unhealthy_and_healthy_again_once_it_moves(tmp_path: Path) -> None:
    """The loop's thread blocks (in ``until``, as in a hung function) until ``/healthz``
    answers 503; the next step makes it answer 200 again. ``/readyz`` fails with it."""
    kafka, app = one_key_world(tmp_path, records=10, seed=4, exactly_once=False)
    runtime = ProcessorRuntime(with_metrics(app, stall_seconds=0.2), 0, kafka=kafka)
    stuck: list[tuple[int, str]] = []
    moved: list[tuple[int, str]] = []

    def until(stats: RuntimeStats) -> bool:
        assert runtime.server is not None
        base = f"http://127.0.0.1:{runtime.server.port}"
        if stats.records >= 5 and not stuck:
            for _attempt in range(2000):  # until the state shows, however long that takes
                answer = get(base + "/healthz")
                if answer[0] == 503:
                    stuck.extend([answer, get(base + "/readyz")])
                    break
                time.sleep(0.05)
            assert stuck, "/healthz never failed while the loop was stuck"
        elif stuck and not moved:
            moved.extend([get(base + "/healthz"), get(base + "/readyz")])
        return stats.records >= 10 and bool(moved)

    runtime.run(until=until)
    (health, text), (ready, _) = stuck
    assert (health, ready) == (503, 503)
    assert "the loop made no step for" in text and "metrics.stall_seconds = 0.2s" in text
    assert [status for status, _ in moved] == [200, 200]


class FakeTime:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_health_routes_follow_the_heartbeat_and_the_observation() -> None:
    time = FakeTime()
    metrics = ProcessorMetrics("sim", 0, stall_seconds=30.0, now=time)
    server = MetricsServer(metrics, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        # starting: alive, not ready
        assert get(base + "/healthz") == (200, "ok: starting, last step 0.0s ago\n")
        assert get(base + "/readyz") == (503, "the processor is starting\n")
        # running, but catching up: alive, not ready (the reason is the body)
        metrics.heartbeat.beat("running")
        catching_up = "catching up for generation 2 (lag 7 records)"
        metrics.publish(Observation(phase="catching_up", ready=False, reason=catching_up))
        assert get(base + "/readyz") == (503, catching_up + "\n")
        metrics.publish(Observation(phase="running", ready=True, reason="ready"))
        assert get(base + "/readyz") == (200, "ready\n")
        # a loop that makes no step for longer than stall_seconds is stuck: neither
        time.now += 31.0
        status, text = get(base + "/healthz")
        assert status == 503 and "no step for 31s" in text and "stall_seconds" in text
        assert get(base + "/readyz")[0] == 503
        assert get(base + "/metrics")[0] == 200  # still scraped (its age is a gauge)
        found = samples(get(base + "/metrics")[1])
        assert value(found, "splitstate_loop_last_step_age_seconds") == 31.0
        time.now += 1.0
        metrics.heartbeat.beat()  # it moves again
        assert get(base + "/healthz")[0] == 200
    finally:
        server.stop()


def test_catch_up_and_handoff_gauges_come_from_the_observation() -> None:
    metrics = ProcessorMetrics("sim", 1)
    metrics.publish(
        Observation(
            phase="catching_up",
            catchup=CatchUpView(2, t1={(INPUT, 3): 50}, t2={(INPUT, 3): 20}, lag={(INPUT, 3): 30}),
            handoffs=(HandoffView(2, 0, 1, "CATCHING_UP"),),
            snapshot_created=0.0,
        )
    )
    found = samples(generate_latest(metrics.registry).decode())
    at_3 = {"processor": "1", "topic": INPUT, "partition": "3"}
    assert value(found, "splitstate_catchup_t1_offset", **at_3) == 50
    assert value(found, "splitstate_catchup_lag_records", **at_3) == 30
    where = {"processor": "1", "generation": "2", "source": "0", "target": "1", "role": "target"}
    assert value(found, "splitstate_handoff_phase", **where, phase="CATCHING_UP") == 1
    assert value(found, "splitstate_handoff_phase", **where, phase="RELEASED") == 0
    assert value(found, "splitstate_snapshot_age_seconds", processor="1") > 0
    metrics.uploaded(1000)
    found = samples(generate_latest(metrics.registry).decode())
    assert value(found, "splitstate_snapshot_upload_bytes_total", processor="1") == 1000


def test_a_port_in_use_is_refused_naming_the_port_and_the_fix() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        server = MetricsServer(ProcessorMetrics("sim", 0), "127.0.0.1", port)
        with pytest.raises(MetricsPortError) as refused:
            server.start()
    message = str(refused.value)
    assert f"127.0.0.1:{port}" in message and "in use" in message
    assert "SPLITSTATE_METRICS__PORT" in message and "port + j" in message


def test_run_all_gives_processor_j_the_port_plus_j() -> None:
    settings = MetricsConfig(port=9400)
    assert [processor_port(settings, j) for j in range(3)] == [9400, 9401, 9402]
    assert processor_port(MetricsConfig(), 2) is None
    assert processor_port(MetricsConfig(port=0), 2) == 0
    child = child_environment(settings, 2, {"PATH": "/bin"})
    assert child == {"PATH": "/bin", PORT_VARIABLE: "9402"}
    assert PORT_VARIABLE not in child_environment(MetricsConfig(), 2, {})
    with pytest.raises(ConfigError, match="at most 65533"):
        processor_port(MetricsConfig(port=65535), 2)


def test_the_metrics_section_of_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    base: dict[str, Any] = {"app_id": "m", "inputs": [{"topic": "t"}], "initial_processors": 1}
    assert AppConfig.load(None, **base).metrics == MetricsConfig()  # off
    monkeypatch.setenv(PORT_VARIABLE, "9500")
    loaded = AppConfig.load(None, **base, metrics={"host": "10.1.2.3"})
    assert (loaded.metrics.port, loaded.metrics.host) == (9500, "10.1.2.3")
    monkeypatch.delenv(PORT_VARIABLE)
    with pytest.raises(ConfigError, match=r"metrics\.port"):
        AppConfig.load(None, **base, metrics={"port": 70000})


def test_the_grafana_dashboard_uses_only_metrics_that_exist() -> None:
    dashboard = json.loads((ROOT / "examples" / "grafana" / "splitstate.json").read_text())
    used = {
        name.removesuffix("_bucket")
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"splitstate_[a-z0-9_]+", target["expr"])
    }
    metrics = ProcessorMetrics("sim", 0)
    metrics.batch({(INPUT, 0): 1}, restored=0, outputs=1, dead_letters=0, seconds=0.01)
    metrics.publish(
        Observation(
            committed={(INPUT, 0): 1},
            ends={(INPUT, 0): 1},
            state_bytes=1,
            catchup=CatchUpView(1, t1={(INPUT, 1): 1}, t2={(INPUT, 1): 1}, lag={(INPUT, 1): 0}),
            handoffs=(HandoffView(1, 0, 1, "READY"),),
            snapshot_created=0.0,
        )
    )
    exposed = {name for name, _ in samples(generate_latest(metrics.registry).decode())}
    exposed |= {name.removesuffix("_bucket") for name in exposed}
    assert used and used <= exposed, used - exposed
    reference = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    assert all(f"`{name}" in reference for name in used), [
        n for n in used if f"`{n}" not in reference
    ]


def test_a_metric_that_cannot_be_read_never_ends_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The state's size read fails (a file RocksDB deleted as it was measured): the run goes
    on to its end, the failure is logged, and the other values are still published."""
    kafka, app = one_key_world(tmp_path, records=12, seed=2, exactly_once=False)
    failures = iter([FileNotFoundError("000012.sst")])

    def size_bytes(_database: object) -> int:
        raise next(failures, None) or FileNotFoundError("again")

    monkeypatch.setattr(ProcessorDatabase, "size_bytes", size_bytes)
    runtime = ProcessorRuntime(with_metrics(app), 0, kafka=kafka)
    stats = runtime.run(until=Until("records", 12))
    assert stats.records == 12
    assert "metrics not updated" in caplog.text and "000012.sst" in caplog.text


def test_the_lag_is_read_without_asking_the_broker(tmp_path: Path) -> None:
    """End offsets for the lag come from what the consumer's fetches saw: the observer makes
    no watermarks call (one that blocks would hold the loop up to Kafka's timeout)."""
    kafka, app = one_key_world(tmp_path, records=12, seed=2, exactly_once=False)
    runtime = ProcessorRuntime(with_metrics(app), 0, kafka=kafka)
    calls: list[str] = []

    def counting(stats: RuntimeStats) -> bool:
        calls.append("step")
        return stats.records >= 12

    original = MemoryConsumer.watermarks

    def watermarks(self: MemoryConsumer, positions: Any) -> Any:
        if calls:  # once the loop runs, only the observer could ask
            raise AssertionError("a watermarks call from the loop")
        return original(self, positions)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MemoryConsumer, "watermarks", watermarks)
        runtime.run(until=counting)
    assert runtime.metrics is not None
    found = samples(generate_latest(runtime.metrics.registry).decode())
    assert value(found, "splitstate_end_offset", topic=INPUT, partition="0") == 12
