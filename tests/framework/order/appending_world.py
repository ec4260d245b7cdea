"""Records for ``appending_app`` and a live reference run of them (``TestDriver``)."""

from __future__ import annotations

import random

from framework.input_times import ORDER_SCOPE
from framework.testing import TestDriver
from rebalance import bucket, key_hash
from rebalance.positions import Position
from tests.framework.order.appending_app import INPUTS, PARTITIONS, Order, appending_app

#: one record as sent: (topic, key, event time)
Sent = tuple[str, bytes, int]
KEYS = [f"k{n}".encode() for n in range(5)]


def drawn(seed: int, count: int) -> list[Sent]:
    """``count`` records of both inputs, arriving in bursts of one input, times rising with
    jitter (some late), so arrival, topic by topic and canonical orders all differ."""
    rng = random.Random(seed)
    sent: list[Sent] = []
    clock = {"a": 1000, "b": 1000}
    while len(sent) < count:
        topic = rng.choice(INPUTS)
        for _ in range(rng.randint(1, 4)):
            clock[topic] += rng.randint(0, 30)
            sent.append((topic, rng.choice(KEYS), clock[topic] - rng.choice([0, 0, 0, 45])))
    return sent[:count]


def driven(sent: list[Sent], order: Order = "canonical", **kwargs: object) -> TestDriver:
    """A driver of the app (inputs applied in ``order``) that was sent ``sent``."""
    return send(TestDriver(appending_app(order), **kwargs), sent)  # type: ignore[arg-type]


def committed(driver: TestDriver) -> tuple[object, ...]:
    """What ``driver`` committed: each key's state, the offsets, the marks."""
    return applied(driver), driver.offsets(), driver.database.progress(ORDER_SCOPE)


def held_after(sent: list[Sent], ends: dict[Position, int]) -> list[Sent]:
    """The records of ``sent`` at or past ``ends`` (a processor resuming there reads them
    again), in the order sent."""
    seen = dict.fromkeys(ends_of([]), 0)
    held = []
    for topic, key, at in sent:
        if seen[home(topic, key)] >= ends.get(home(topic, key), 0):
            held.append((topic, key, at))
        seen[home(topic, key)] += 1
    return held


def applied(driver: TestDriver) -> dict[bytes, str]:
    """Each key's state: the records it applied, in order."""
    return {key: driver.state("applied", key) for key in KEYS if driver.state("applied", key)}


def home(topic: str, key: bytes) -> Position:
    """Where producers place ``key`` in ``topic``."""
    return topic, bucket(key_hash(key), PARTITIONS, PARTITIONS)


def ends_of(sent: list[Sent]) -> dict[Position, int]:
    """Each partition's end after ``sent``."""
    ends = {(topic, p): 0 for topic in INPUTS for p in range(PARTITIONS)}
    for topic, key, _at in sent:
        ends[home(topic, key)] += 1
    return ends


def go_on(driver: TestDriver, sent: list[Sent]) -> list[tuple[object, ...]]:
    """Send ``sent`` to ``driver``: what it committed before, then after each record."""
    steps = [committed(driver)]
    for topic, key, at in sent:
        driver.send(topic, key, {"at": at}, timestamp=at)
        steps.append(committed(driver))
    return steps


def send(driver: TestDriver, sent: list[Sent]) -> TestDriver:
    """Send ``sent`` to ``driver``; the driver."""
    for topic, key, at in sent:
        driver.send(topic, key, {"at": at}, timestamp=at)
    return driver
