"""Records no reader can read, written by someone who can write to the coordination topics
(a plan with ``junk``), and what every party must do with each.

- **The control log**, at a random step of the chaos phase: one record no reader can read
  (``CONTROL_JUNK``), then one of a kind no splitstate knows. Every party that reads the log
  stops at the first the same way, naming its offset (``ControlRecordError``): processors at
  their start or as it arrives, ``status`` (asked at once), the operators' ``scale`` and
  ``expand``; all ignore the second. A few seconds later (at the end of the chaos phase at
  the latest) the operator drops the first (``ControlLog.drop``, as ``splitstate control
  drop`` does); from then on every party skips it, and the world must settle and hold every
  invariant.
- **The topic registry**, at another step: entries no app's topic has (a topic no app uses,
  unreadable values; a key that is not UTF-8). Every app and producer ignores them.
- **The progress topic**, at the same step: reports that cannot be read, one of them of a
  running processor. ``status`` leaves them out.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from framework.coordination.control_log import ControlLog, ControlRecordError
from framework.coordination.registry import REGISTRY_TOPIC
from framework.kafka import KafkaIOError
from framework.ops.status import collect_status

if TYPE_CHECKING:
    from tests.sim.world import World

__all__ = ["CONTROL_JUNK", "Junk"]

#: control-log records no reader can read: not JSON, not an object, a missing field, a bad
#: integer, wrong types, a negative or huge number, a handoff event of no kind
CONTROL_JUNK = (
    b"not json",
    b"[1, 2]",
    b'"scale"',
    b'{"type": "growth"}',
    b'{"type": 7}',
    b'{"type": "handoff", "generation": "1", "source": 0, "target": 1, "event": "READY"}',
    b'{"type": "instance", "processor": "zero", "instance": "i"}',
    b'{"type": "scale", "generation": 1, "processors": -2, "partitions": {}}',
    b'{"type": "metadata_hash", "hash": 1e400}',
    b'{"type": "metadata_hash", "hash": 18446744073709551615}',
    b'{"type": "abort", "generation": true}',
    b'{"type": "handoff", "generation": 1, "source": 0, "target": 1, "event": "LEAVE"}',
    b'{"type": "app", "app_id": "sim", "initial_processors": 1.5, "inputs": {"in": 2}}',
)
#: a kind no splitstate knows: ignored by every reader
UNKNOWN_KIND = b'{"type": "from-a-later-version", "processors": 9}'
#: registry records no app's topic has
REGISTRY_JUNK = (
    (b"some-other-apps-topic", b"{}"),
    (b"another-apps-topic", b'{"topic": "another-apps-topic", "counts": []}'),
    (b"a-third-apps-topic", b"not json"),
    (b"\xff\xfe", b'{"topic": "x", "counts": [1]}'),
)
#: progress reports that cannot be read (processor 0's until it reports again)
PROGRESS_JUNK = (
    (b"processor/7", b"[]"),
    (b"processor/0", b'{"processor": 0, "host": "h", "pid": "x", "updated": 1}'),
)


class Junk:
    """The writer of ``world``'s junk records and the operator who drops the control log's
    (see the module); ``problems`` says what a party did wrong with them."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.on = world.plan.junk
        rng = random.Random(world.plan.seed * 7 + 5)
        steps = max(world.plan.chaos_steps, 1)
        self._control_step = rng.randrange(steps)
        self._others_step = rng.randrange(steps)
        self._value = rng.choice(CONTROL_JUNK)
        self._fix_after = rng.uniform(0.5, 8.0)
        #: the junk control record's offset, when it was written and when it was dropped
        self.offset: int | None = None
        self.written_at: float | None = None
        self.dropped_at: float | None = None
        self._others_written = False
        self._problems: list[str] = []

    def step(self, step: int) -> None:
        """Write what is due at chaos step ``step``; drop the control record when due."""
        if not self.on:
            return
        if self.offset is None and step >= self._control_step:
            self._write_control()
        if not self._others_written and step >= self._others_step:
            self._write_others()
        written = self.written_at
        if written is not None and self.world.clock.monotonic() >= written + self._fix_after:
            self.fix()

    def fix(self) -> None:
        """The operator drops the junk control record (at once, if still there)."""
        if self.offset is None or self.dropped_at is not None:
            return
        ControlLog(self.world.driver, self.world.app.config.control_topic).drop(self.offset)
        self.dropped_at = self.world.clock.monotonic()

    def problems(self) -> list[str]:
        """What a party did with the junk that it must not (asked once the record was
        dropped)."""
        found = list(self._problems)
        others = sorted({at for at in self.world.events.control_refusals if at != self.offset})
        if others:
            found.append(
                f"parties stopped at control-log offsets {others}; the only record no reader "
                f"can read is at {self.offset}"
            )
        if self.offset is not None and self.world.control() != self.world.replay_control():
            found.append(
                "the control state followed past the dropped record is not the one a new "
                f"reader reads: {self.world.control()} != {self.world.replay_control()}"
            )
        return found

    def _write_control(self) -> None:
        world = self.world
        topic = world.app.config.control_topic
        self.offset = world.driver.append(topic, [(b"junk/1", self._value)]) - 1
        world.driver.append(topic, [(b"junk/2", UNKNOWN_KIND)])
        self.written_at = world.clock.monotonic()
        try:
            collect_status(world.app, kafka=world.driver)
        except ControlRecordError as error:
            if error.offset != self.offset:
                self._problems.append(f"status stopped at offset {error.offset}: {error}")
        else:
            self._problems.append(
                f"status read past the control record at offset {self.offset}, which no "
                f"reader can read ({self._value!r})"
            )

    def _write_others(self) -> None:
        world = self.world
        try:
            world.driver.append(REGISTRY_TOPIC, list(REGISTRY_JUNK))
            world.driver.append(world.app.config.progress_topic, list(PROGRESS_JUNK))
        except KafkaIOError:
            return  # (the progress topic is made by a first start: written at a later step)
        self._others_written = True
