"""A simulated world: one in-memory Kafka cluster, the app's processors, producers writing
per-key sequences, an operator scaling and growing, and the chaos that kills and fails them.

Every party runs the real code (``ProcessorRuntime``, ``SplitstateProducer``, and the
operators' ``request_scale``, ``abort_scale``, ``expand_topic``: ``tests/sim/operators.py``)
through its own ``MemoryKafka`` port; the driver's own reads (the supervisor's, the
checks') go through a port of its own that never fails. The supervisor is the driver:
between steps it starts a processor for every id the control state gives work and that is
not running, as ``splitstate run --all`` does.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from framework.app import App
from framework.config import ConfigError
from framework.coordination.control_guard import ControlLogLostError
from framework.coordination.control_log import ControlLog, ControlRecordError
from framework.coordination.registry import TopicRegistry
from framework.kafka import COMPACTED, TopicSpec
from framework.processing import ProcessorFencedError, ProcessorStoppedError
from framework.runtime.loop import ProcessorRuntime
from rebalance import bucket, key_hash
from rebalance.control import ControlState
from rebalance.record_checks import MalformedRecordError, json_object
from statestore import DatabaseIdentity, ProcessorDatabase, StoreSpec, processor_path
from tests.sim.app import INPUT, OUTPUT, make_app
from tests.sim.broker import Broker, StoredRecord
from tests.sim.chaos import Chaos
from tests.sim.compacted import input_configs
from tests.sim.disks import Disks
from tests.sim.kafka import MemoryKafka
from tests.sim.plan import Operation, Plan
from tests.sim.scheduler import Killed, Party, Scheduler
from tests.sim.world_events import Events
from tests.sim.world_producers import start_producer

#: how long the suspended machine of a plan with ``days_later`` sleeps
DAYS_LATER_SECONDS = 12 * 86_400.0

__all__ = ["World"]

log = logging.getLogger(__name__)

#: Simulated seconds a crashed or killed processor stays down before the supervisor starts
#: it again (drawn per restart: a long one leaves a scale half done for a while).
RESTART_SECONDS = (0.5, 5.0)


#: Errors a processor must never stop with here: the simulated world never loses or rolls
#: back the control log, and its config is valid and never changes.
FALSE_ALARMS = (ControlLogLostError, ConfigError)


class World:
    """One schedule's world."""

    def __init__(self, plan: Plan, root: Path) -> None:
        self.plan = plan
        self.rng = random.Random(plan.seed)
        self.scheduler = Scheduler(random.Random(plan.seed * 7 + 1))
        self.clock = self.scheduler.clock
        self.broker = Broker(random.Random(plan.seed * 7 + 2))
        self.chaos = Chaos(
            self.scheduler, random.Random(plan.seed * 7 + 3), plan.fail_rate, plan.slow_rate
        )
        self.disks = Disks(root / "state", plan.rocksdb)
        self.app: App = make_app(
            root / "state",
            partitions=plan.partitions,
            initial_processors=plan.initial_processors,
            max_records=plan.max_records,
            lease_ms=2000,
            ready_lag=plan.ready_lag,
            die=self.die,
            outputs=plan.outputs,
            snapshots=plan.snapshots,
            exactly_once=plan.exactly_once,
            in_flight=plan.in_flight,
            latest=plan.compacted,
            timed=plan.timed,
        )
        self.events = Events()
        #: the chance of a kill right after a handoff record (0 once the chaos phase ends)
        self.protocol_kills = plan.protocol_kill_rate
        #: kills decided at a handoff record, due a little later: (simulated time, processor)
        self.kills_due: list[tuple[float, int]] = []
        #: processors to kill at their next call, keeping their disks
        self.kills_now: list[int] = []
        self.driver = MemoryKafka(self.broker, self.clock, name="driver")
        self.processors: dict[int, Party] = {}
        #: the name of each process's port (``name#incarnation``: the origin of its writes)
        self.port_of: dict[Party, str] = {}
        #: when a processor was last started (the world is not settled right after)
        self.last_start = 0.0
        self.restart_at: dict[int, float] = {}
        self.producers: list[Party] = []
        self.operators: list[Party] = []
        #: what each operator still has to do, the operation it is at first
        #: (``tests/sim/operators.py``)
        self.operations_left: dict[Party, tuple[Operation, ...]] = {}
        #: called with each operation as an operator begins it (``tests/sim/aimed.py``)
        self.operation_watchers: list[Callable[[Operation], None]] = []
        self.produced = 0
        self._incarnations = 0
        self._processes = 0
        #: processors whose state directory was lost and not yet re-created
        self._disk_lost: set[int] = set()
        #: (processors, each input partition's end) once the stores were seen to hold every
        #: input record (``tests/sim/driver.py``: the settle reads them once)
        self.caught_up: tuple[int, tuple[tuple[tuple[str, int], int], ...]] | None = None
        #: the driver's control state, and the control log's offset it has read to
        self._control = ControlState()
        self._control_next = 0
        #: the app (its state directory: the machine) each processor runs with when not the
        #: first one's (after the operator stopped the first instance of a twinned processor)
        self.homes: dict[int, App] = {}
        #: the processor a twin (``tests/sim/twin.py``) was started of, and whether both
        #: instances are deployed now
        self.twin_of: int | None = None
        self.twin_deployed = False
        #: instances stopped because another instance fenced them, not restarted until the
        #: operator stops one of the two (``splitstate run`` exits for good then)
        self.fenced: set[str] = set()

    # -- setting up ----------------------------------------------------------------------

    def create_topics(self) -> None:
        """The app's topics and registry entries, as ``splitstate topics create`` makes them."""
        config = self.app.config
        self.driver.create_topics(
            [
                TopicSpec(INPUT, self.plan.partitions, config=input_configs(self.plan.compacted)),
                TopicSpec(OUTPUT, 2),
                TopicSpec(config.dead_letters, 1),
                TopicSpec(config.control_topic, 1, config=COMPACTED),
            ]
        )
        registry = TopicRegistry(self.driver)
        registry.ensure_topic()
        for topic in [*config.inputs, *config.outputs]:
            registry.register(
                topic.topic,
                topic.partitions,
                lease_ms=topic.producer_lease_ms,
                delivery_timeout_ms=topic.producer_delivery_timeout_ms,
            )

    def port(self, name: str) -> MemoryKafka:
        """A new process's port to the cluster."""
        return MemoryKafka(
            self.broker, self.clock, name=name, faults=self.chaos, max_queued=self.plan.max_queued
        )

    def spawn(self, name: str, body: Callable[[MemoryKafka, Party], None]) -> Party:
        """A new process running ``body`` with its own port (named ``name#incarnation``);
        a kill crashes that port."""
        self._processes += 1
        port = self.port(f"{name}#{self._processes}")
        holder: list[Party] = []

        def run() -> None:
            try:
                body(port, holder[0])
            except BaseException:
                self.events.cut_short.add(port.name)
                raise

        party = self.scheduler.spawn(name, run)
        holder.append(party)
        self.port_of[party] = port.name
        party.on_kill.append(lambda: self.events.cut_short.add(port.name))
        party.on_kill.append(lambda: port.crash(self.rng))
        return party

    # -- processors ----------------------------------------------------------------------

    def state_path(self, processor: int) -> Path:
        """The state directory processor ``processor`` runs with now (its machine's)."""
        app = self.homes.get(processor, self.app)
        return processor_path(app.config.app_state_dir, processor)

    def start_processor(self, processor: int) -> None:
        """Run processor ``processor`` (as ``splitstate run`` would) on its machine."""
        app = self.homes.get(processor, self.app)
        name = f"processor-{processor}" if app is self.app else f"twin-processor-{processor}"
        self.processors[processor] = self.run_processor(processor, app, name)

    def run_processor(self, processor: int, app: App, name: str) -> Party:
        """A process ``name`` running processor ``processor`` of ``app`` (whose state
        directory says which machine it runs on)."""

        def body(port: MemoryKafka, party: Party) -> None:
            if self.twin_deployed and processor == self.twin_of:
                self.events.twinned.add(port.name)
            opener = self.disks.opener(party)

            def open_database(
                path: Path, identity: DatabaseIdentity, stores: Sequence[StoreSpec]
            ) -> ProcessorDatabase:
                database = opener(path, identity, stores)
                if database.created and processor in self._disk_lost:
                    # a crash loop: the run that re-creates a lost directory dies at once
                    self._disk_lost.discard(processor)
                    if self.chaos.active and self.rng.random() < self.plan.reopen_kill_rate:
                        self.kills_now.append(processor)
                return database

            runtime = ProcessorRuntime(
                app,
                processor,
                kafka=port,
                open_database=open_database,
                snapshots=self.plan.snapshots,
                holds_state=self.disks.holds,
                discard=self.disks.lose,
            )
            runtime.run()

        topic = self.app.config.control_topic
        records = len(self.broker.partition((topic, 0)).records)
        if self.chaos.active and records > 1 and self.rng.random() < self.plan.aimed_rate * 0.3:
            # aimed: its first read of the control log stops short, then the log is away
            self.chaos.cut_next[(name, topic)] = self.rng.uniform(31.0, 40.0)
        party = self.spawn(name, body)
        self.last_start = self.clock.monotonic()
        return party

    def control(self) -> ControlState:
        """The control state as the driver follows it now: the records appended since its
        last look applied to what it had (as a ``ControlWatcher`` does; a record compaction
        removes has a newer one after it, so the state is the whole log's). At a record no
        reader can read it stops, as every reader does, until a tombstone of its key
        follows it (``ControlLog.drop``); then it skips it, as every reader does."""
        log = self.broker.partition((self.app.config.control_topic, 0))
        new: list[StoredRecord] = []
        for record in reversed(log.records):
            if record.offset < self._control_next:
                break
            new.append(record)
        for record in reversed(new):
            if record.value is not None:
                try:
                    self._control = self._control.apply(json_object(record.value))
                except MalformedRecordError:
                    dropped = any(
                        later.key == record.key and later.value is None
                        for later in log.records
                        if later.offset > record.offset
                    )
                    if not dropped:
                        break
            self._control_next = record.offset + 1
        return self._control

    def replay_control(self) -> ControlState:
        """The control state read from the whole control log, as a new reader would."""
        return ControlLog(self.driver, self.app.config.control_topic).read()

    def supervise(self) -> None:
        """Start every processor that has work and is not running; note crashes."""
        state = self.control()
        if state.generation is None:  # never started (or killed before it recorded the app)
            for processor in range(self.plan.initial_processors):
                party = self.processors.get(processor)
                if party is None or not party.runnable:
                    self.note_crash(processor)
                    if self.restart_at.get(processor, 0.0) <= self.clock.monotonic():
                        self.start_processor(processor)
            return
        top = state.generation.processors
        if state.scaling is not None:
            top = max(top, state.scaling.new_processors)
        for processor in range(top + 1):
            party = self.processors.get(processor)
            if party is not None and party.runnable:
                continue
            self.note_crash(processor)
            if self.restart_at.get(processor, 0.0) > self.clock.monotonic():
                continue
            if party is not None and party.name in self.fenced:
                continue  # another instance fenced it: it stays stopped (``tests/sim/twin.py``)
            if state.has_work(processor):
                self.start_processor(processor)

    def note_crash(self, processor: int, party: Party | None = None) -> None:
        """Note how a processor (``party``: one of its instances) that stopped on an error
        stopped; it restarts after a pause (one that another instance fenced stays stopped
        while its twin is deployed)."""
        first = self.processors.get(processor)
        party = first if party is None else party
        if party is None or party.error is None:
            return
        fenced = isinstance(party.error, ProcessorFencedError)
        if fenced and processor == self.twin_of:
            # expected of a twin: while both are deployed it stays stopped (as ``run`` exits
            # for good); once the operator stopped the other one, it is started again
            self.events.twin.append(
                f"t={self.clock.monotonic():.2f} {party.name} stopped: {party.error}"
            )
            if self.twin_deployed:
                self.fenced.add(party.name)
        elif isinstance(party.error, ProcessorStoppedError) and self.events.halted is None:
            self.events.halted = f"processor-{processor}: {party.error}"
        self.note_refusal(party.error)
        line = (
            f"t={self.clock.monotonic():.2f} {party.name}: "
            f"{type(party.error).__name__}: {party.error}"
        )
        self.events.errors.append(line)
        if isinstance(party.error, FALSE_ALARMS):
            self.events.false_alarms.append(line)
        party.error = None
        if party is first:  # (a twin's machine restarts it on its own: ``tests/sim/twin.py``)
            pause = self.rng.uniform(*RESTART_SECONDS)
            self.restart_at[processor] = self.clock.monotonic() + pause

    def note_refusal(self, error: BaseException) -> None:
        """Note the offset a ``ControlRecordError`` names (``tests/sim/junk.py``)."""
        if isinstance(error, ControlRecordError):
            self.events.control_refusals.append(error.offset)

    def die(self) -> NoReturn:
        """The calling process dies here (a record that kills it while the function runs)."""
        party = self.scheduler.current
        assert party is not None, "only a process dies"
        while party.parent is not None:
            party = party.parent
        self.scheduler.kill(party)
        raise Killed(f"{party.name}: killed by a record")

    def jump_days(self) -> None:
        """The machine was suspended for 12 days: the clock jumps, every wait ends."""
        self.scheduler.now += DAYS_LATER_SECONDS
        self.events.jumped_at = self.scheduler.now
        self.events.jumped_ms = int(self.clock.time() * 1000)
        self.events.resumes.append(self.events.jumped_ms)

    def kill_processor(self, processor: int, lose_disk: bool, why: str = "") -> None:
        """Kill a processor between two of its calls; maybe its disk goes too."""
        party = self.processors.get(processor)
        if party is None or not party.runnable:
            return
        self.scheduler.kill(party)
        lost = " and its state directory" if lose_disk else ""
        why = f" {why}" if why else ""
        self.events.kills.append(f"t={self.clock.monotonic():.2f} processor-{processor}{lost}{why}")
        self.restart_at[processor] = self.clock.monotonic() + self.rng.uniform(*RESTART_SECONDS)
        if lose_disk:
            self.disks.lose(self.state_path(processor))
            self.events.lost_disks.append(processor)
            self._disk_lost.add(processor)

    # -- producers -----------------------------------------------------------------------

    def start_producer(self, records: int) -> None:
        """A producer writing ``records`` records (``tests.sim.world_producers``)."""
        start_producer(self, records)

    def producer_name(self, prefix: str) -> tuple[str, random.Random]:
        """The next producer's name (``prefix`` and its number) and its seeded ``Random``."""
        self._incarnations += 1
        name = f"{prefix}{self._incarnations}"
        return name, random.Random(self.plan.seed * 31 + self._incarnations)

    def keys(self) -> list[bytes]:
        """The plan's keys."""
        return [f"k{i}".encode() for i in range(self.plan.keys)]

    def aborted_keys(self) -> list[bytes]:
        """The keys of the plan's ``aborted_partition`` (placed there by the initial count,
        in it or its children later): written only in transactions that abort."""
        partition = self.plan.aborted_partition
        if partition is None:
            return []
        initial = self.plan.partitions
        return [key for key in self.keys() if bucket(key_hash(key), initial, initial) == partition]

    def committed_keys(self) -> list[bytes]:
        """The keys records that may be read are written with (all but the aborted
        partition's, unless it holds every key)."""
        aborted = self.aborted_keys()
        return [key for key in self.keys() if key not in aborted] or self.keys()

    # -- the operator --------------------------------------------------------------------

    def operating(self) -> bool:
        """Whether an operator is still at its plan or a scale is under way."""
        if any(operator.runnable for operator in self.operators):
            return True
        return self.control().scaling is not None
