"""An interval-join app whose outputs name both records of each call, records for it drawn
so that arrival and canonical orders differ, and an oracle of its matches.

Inputs ``payments`` (left, listed first) and ``orders`` (right), ``PARTITIONS`` each, keyed
alike, ``time.input_order: canonical``, event time the Kafka timestamp. Each call outputs
``{"l": n or None, "r": n or None}``, the records' ``n`` fields."""

from __future__ import annotations

import random
from typing import Any

import orjson

from framework import App, AppConfig, Output, Record
from framework.config import TopicConfig
from framework.config_time import TimeConfig
from framework.joins import JoinType
from framework.testing import TestDriver
from rebalance import bucket, key_hash
from rebalance.positions import Position

INPUTS = ("payments", "orders")
PARTITIONS = 2
KEYS = [f"k{n}".encode() for n in range(3)]
#: one record as sent: (topic, key, event time, n)
Sent = tuple[str, bytes, int, int]


def join_app(
    how: JoinType = "inner",
    *,
    before: int = 100,
    after: int = 0,
    grace: int = 0,
    order: str = "canonical",
) -> App:
    """The app (a new one each call)."""
    app = App(
        AppConfig(
            app_id="joins",
            inputs=[TopicConfig(topic=topic, partitions=PARTITIONS) for topic in INPUTS],
            outputs=[TopicConfig(topic="matched", partitions=PARTITIONS)],
            initial_processors=1,
            time=TimeConfig(input_order=order),  # type: ignore[arg-type]
        )
    )

    @app.interval_join(
        "payments",
        "orders",
        before=before,
        after=after,
        grace=grace,
        how=how,
        left_type=dict,
        right_type=dict,
    )
    def match(left: Record[dict[str, int]] | None, right: Record[dict[str, int]] | None) -> Any:
        """Name both records (``None``: no match)."""
        return Output(
            {
                "l": None if left is None else left.value["n"],
                "r": None if right is None else right.value["n"],
            }
        )

    return app


def drawn(seed: int, count: int, *, late: int = 45) -> list[Sent]:
    """``count`` records of both inputs in bursts, times rising with jitter (some ``late`` ms
    behind), each with its own ``n``."""
    rng = random.Random(seed)
    sent: list[Sent] = []
    clock = dict.fromkeys(INPUTS, 1000)
    while len(sent) < count:
        topic = rng.choice(INPUTS)
        for _ in range(rng.randint(1, 4)):
            clock[topic] += rng.randint(0, 30)
            at = clock[topic] - rng.choice([0, 0, 0, late])
            sent.append((topic, rng.choice(KEYS), at, len(sent) + 1))
    return sent[:count]


def interleaved(sent: list[Sent], seed: int) -> list[Sent]:
    """``sent`` arriving in another interleaving of its topics (each topic's own order, and
    so each partition's, kept)."""
    rng = random.Random(seed)
    queues = {topic: [s for s in sent if s[0] == topic] for topic in INPUTS}
    out: list[Sent] = []
    while any(queues.values()):
        topic = rng.choice([t for t in INPUTS if queues[t]])
        out.append(queues[topic].pop(0))
    return out


def send(driver: TestDriver, sent: list[Sent]) -> TestDriver:
    """Send ``sent`` to ``driver``; the driver."""
    for topic, key, at, n in sent:
        driver.send(topic, key, orjson.dumps({"n": n}), timestamp=at)
    return driver


def home(topic: str, key: bytes) -> Position:
    """Where producers place ``key`` in ``topic``."""
    return topic, bucket(key_hash(key), PARTITIONS, PARTITIONS)


def unread(driver: TestDriver, sent: list[Sent], cut: int) -> list[Sent]:
    """What a processor resuming at ``driver``'s committed offsets reads: the records sent
    past them (held in the merge, not committed) and the rest."""
    offsets = driver.offsets()
    seen: dict[Position, int] = {}
    rest = []
    for index, record in enumerate(sent):
        position = home(record[0], record[1])
        offset = seen.get(position, 0)
        seen[position] = offset + 1
        if index >= cut or offset >= offsets.get(position, 0):
            rest.append(record)
    return rest


def pairs(driver: TestDriver) -> list[tuple[int | None, int | None]]:
    """The driver's outputs as ``(left n, right n)``, in order."""
    return [(value["l"], value["r"]) for value in driver.output_values("matched")]


def oracle(sent: list[Sent], before: int, after: int) -> set[tuple[int, int]]:
    """Every match of ``sent`` when nothing is late: each left and right record of a key
    with ``t - before <= s <= t + after``."""
    lefts = [s for s in sent if s[0] == "payments"]
    rights = [s for s in sent if s[0] == "orders"]
    return {
        (ln, rn)
        for _lt, lkey, t, ln in lefts
        for _rt, rkey, s, rn in rights
        if lkey == rkey and t - before <= s <= t + after
    }
