"""A twin: a second instance of a processor, as a mistaken second pod would be.

At the plan's ``twin_at`` (simulated seconds) a second instance of a processor starts on
another machine: the same app and processor id, its own state directory, the snapshot store
both reach (a receiver of the scale under way one time in two when there is one, else any
processor with work). With ``twin_receiver`` it is a twin of the first receiver whose
catch-up began (its START_CATCH_UP), ``twin_at`` seconds after that: the operator started a
new processor's pod twice. Its machine restarts it after a crash. Under exactly-once the newer
instance's transactional producer fences the other one, which stops (``splitstate run``
exits for good): it stays stopped while both are deployed. ``twin_for`` seconds later (at
the end of the chaos phase at the latest) the operator stops one of the two: the first one
(``stop_first``: the processor runs on the twin's machine from then on) or the twin; an
instance the other one fenced is then started again.
"""

from __future__ import annotations

from framework import App
from rebalance.control import ControlState
from tests.sim.adversary import control_fact
from tests.sim.app import make_app
from tests.sim.broker import StoredRecord
from tests.sim.plan import Plan
from tests.sim.scheduler import Party
from tests.sim.world import RESTART_SECONDS, World

__all__ = ["Twin"]


class Twin:
    """The twin of one of ``world``'s processors (see the module)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.plan: Plan = world.plan
        self.app: App | None = None
        self.party: Party | None = None
        #: when it was deployed and when the operator stopped one of the two
        self.started: float | None = None
        self.stopped: float | None = None
        #: when its machine starts it again after it stopped on its own
        self._restart_at: float | None = None
        #: the first receiver whose catch-up began, and when (``twin_receiver``)
        self._receiver: tuple[int, float] | None = None
        if self.plan.twin and self.plan.twin_receiver:
            world.broker.watchers.append(self._watch)

    def _watch(self, record: StoredRecord) -> None:
        """Note the first START_CATCH_UP in the control log."""
        if self._receiver is not None or record.value is None:
            return
        if record.topic != self.world.app.config.control_topic:
            return
        fact = control_fact(record.value)
        if fact is None:
            return
        if fact.get("type") == "handoff" and fact.get("event") == "START_CATCH_UP":
            self._receiver = (int(fact["target"]), self.world.clock.monotonic())

    def step(self) -> None:
        """Start the twin when its time came (once the app runs), stop one of the two
        ``twin_for`` seconds later."""
        world = self.world
        now = world.clock.monotonic()
        if not self.plan.twin:
            return
        if self.started is None:
            if self.plan.twin_receiver:
                if self._receiver is not None and now >= self._receiver[1] + self.plan.twin_at:
                    self.start(self._receiver[0])
            elif now >= self.plan.twin_at and world.control().generation is not None:
                self.start()
        elif self.stopped is None and now >= self.started + self.plan.twin_for:
            self.stop()

    def start(self, receiver: int | None = None) -> None:
        """Start a second instance of ``receiver``, or of a processor with work (see the
        module)."""
        world = self.world
        state = world.control()
        running = sorted(j for j, party in world.processors.items() if party.runnable)
        scale = state.scaling
        receivers = [] if scale is None else sorted({h.target for h in scale.handoffs.values()})
        candidates = [j for j in receivers if state.has_work(j)]
        if receiver is not None:
            candidates = [receiver] if state.has_work(receiver) else []
        elif not candidates or world.rng.random() < 0.5:
            candidates = [j for j in running if state.has_work(j)]
        if not candidates:
            self.started = self.stopped = world.clock.monotonic()  # no twin after all
            return
        processor = world.rng.choice(candidates)
        plan = self.plan
        app = make_app(
            world.disks.root.with_name("twin-state"),
            partitions=plan.partitions,
            initial_processors=plan.initial_processors,
            max_records=plan.max_records,
            lease_ms=2000,
            ready_lag=plan.ready_lag,
            die=world.die,
            outputs=plan.outputs,
            snapshots=plan.snapshots,
            exactly_once=plan.exactly_once,
            in_flight=plan.in_flight,
            latest=plan.compacted,
            timed=plan.timed,
        )
        app.config.snapshots.url = world.app.config.snapshot_url  # one store both reach
        self.app, self.started = app, world.clock.monotonic()
        world.twin_of, world.twin_deployed = processor, True
        role = ""
        if scale is not None and processor in receivers:
            phases = [h.phase.value for h in scale.handoffs.values() if h.target == processor]
            role = f" (a receiver of generation {scale.generation}: {', '.join(phases)})"
        world.events.twin.append(
            f"t={self.started:.2f} a twin of processor-{processor} starts{role}"
        )
        first = world.processors.get(processor)
        if first is not None and first.runnable:
            world.events.twinned.add(world.port_of[first])
        self.party = world.run_processor(processor, app, f"twin-processor-{processor}")

    def supervise(self, state: ControlState) -> None:
        """Its machine starts it again a while after it stopped, while it is deployed,
        has work, and was not fenced by the other instance."""
        world, party, processor = self.world, self.party, self.world.twin_of
        if party is None or processor is None or party.runnable or self.stopped is not None:
            return
        now = world.clock.monotonic()
        if self._restart_at is None:
            world.note_crash(processor, party)
            party.error = None
            self._restart_at = now + world.rng.uniform(*RESTART_SECONDS)
        if now < self._restart_at or party.name in world.fenced or not state.has_work(processor):
            return
        assert self.app is not None
        self._restart_at = None
        self.party = world.run_processor(processor, self.app, f"twin-processor-{processor}")

    def stop(self) -> None:
        """The operator stops one of the two instances (see the module)."""
        world, processor, twin = self.world, self.world.twin_of, self.party
        if processor is None or self.stopped is not None:
            return
        self.stopped = world.clock.monotonic()
        world.twin_deployed = False
        first = world.processors.get(processor)
        if self.plan.stop_first:
            if first is not None:
                world.scheduler.kill(first)
            assert self.app is not None
            world.homes[processor] = self.app
            if twin is not None:
                world.processors[processor] = twin
            which = "the first instance"
        else:
            if twin is not None:
                world.scheduler.kill(twin)
            which = "the twin"
        world.fenced.clear()  # an instance the other one fenced is started again
        self.party = None
        world.events.twin.append(
            f"t={self.stopped:.2f} the operator stops {which} of processor-{processor}"
        )
