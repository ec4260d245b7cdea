"""Review: a tick holds times of at most 2**62 - 1 ms in size (``read_tick``: "not whole
milliseconds in range"), but a record's event time was taken whatever its size. One record
with an event time past that (a garbage field, a forged Kafka timestamp) raised its
partition's floor there, and the owner then wrote ticks with that floor, which every reader
(the owner too) refuses as "not a tick" (a dead letter each): one at every ``tick_interval``
while any key there has something due, for ever. Such an event time is no time of the key's:
the record is a ``decode`` dead letter, as one without an event time is."""

from __future__ import annotations

from framework.processing import StoredMessage
from framework.time.ticks import read_tick, tick_headers
from tests.framework.test_ticking import NOW, TOPIC, _ms, _World
from tests.integration.apps.sessions import GAP_MS

BEYOND = 1 << 62  # one past the largest time a tick holds


def test_an_event_time_beyond_a_ticks_range_is_refused_and_moves_no_floor() -> None:
    world = _World()
    key = b"a"
    world.send(key, _ms(NOW))  # its quiet timer: due at NOW + GAP
    partition = world.home(key)
    far = next(k for k in (b"f%d" % i for i in range(100)) if world.home(k) == partition)
    offset = world.offsets[(TOPIC, partition)]
    batch = world.database.begin()
    message = StoredMessage(TOPIC, partition, offset, far, b"", BEYOND, [])
    _outputs, dead = world.records.process(batch, message)
    batch.set_offset(TOPIC, partition, offset + 1)
    batch.commit()
    ticks = world.decide(after=GAP_MS / 1000)
    assert ticks, "a key is due: the partition is ticked"
    for tick in ticks:  # every reader takes the tick as one
        assert not isinstance(read_tick(tick_headers(tick.floor, tick.wall)), str), tick
    assert dead is not None
    assert dead.stage == "decode"
    assert "no event time" in dead.reason


def test_the_largest_time_a_tick_holds_is_an_event_time() -> None:
    world = _World()
    world.send(b"a", BEYOND - 1)
    world.send(b"b", -(BEYOND - 1))
