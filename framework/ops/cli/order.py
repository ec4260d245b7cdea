"""``splitstate order base``: publish a growth child's base that nobody publishes."""

from __future__ import annotations

import argparse

from framework.app import App
from framework.config import ConfigError
from framework.coordination.control_log import ControlLog
from framework.coordination.registry import TopicRegistry
from framework.input_times import InputTimes
from framework.kafka import Clients, Kafka
from framework.loader import load_app
from framework.ops.cli._arguments import app_arguments
from framework.ops.growth_base_history import GrowthBaseError, base_from_history, child_life
from framework.runtime.growth_bases import growth_base_record

__all__ = ["order_base", "register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``order`` subcommand."""
    order = commands.add_parser("order", help="repair the canonical input order's records")
    actions = order.add_subparsers(dest="action", required=True, metavar="ACTION")
    base = actions.add_parser(
        "base",
        parents=[app_arguments()],
        help="publish the base of a growth child that waits for one nobody publishes (its "
        "parent was read past its marker under `arrival` or by an older splitstate): "
        "computed from the parent's history (--from-history), or given (--base)",
    )
    base.add_argument("--topic", required=True, help="the input topic")
    base.add_argument("--partition", type=int, required=True, help="the growth child")
    how = base.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "--from-history",
        action="store_true",
        help="compute it from the parent's history in Kafka, from its life's start",
    )
    how.add_argument("--base", type=int, metavar="N", help="publish N (a base computed elsewhere)")
    base.set_defaults(handler=_base)


def order_base(
    app: App, kafka: Kafka, topic: str, partition: int, base: int | None = None
) -> tuple[int, int, bool]:
    """Publish the base of ``topic[partition]``'s last growth life in ``app``'s control log:
    ``base``, else computed from its parent's history (``base_from_history``); returns
    ``(its life's start, the base recorded, whether this call wrote it)`` (a base recorded
    already stays: the first record of a life applies). ``GrowthBaseError`` or
    ``ConfigError`` when it cannot."""
    entries = TopicRegistry(kafka).read()
    if topic not in entries:
        raise ConfigError(f"{topic!r} is not in the topic registry")
    entry = entries[topic]
    life = child_life(entry.history, partition)
    if life is None:
        raise GrowthBaseError(f"{topic}[{partition}] is not a growth child in the topic registry")
    control = ControlLog(kafka, app.config.control_topic)
    recorded = control.read().growth_bases
    start = life[0]
    known = recorded.get((topic, partition, start))
    if known is not None:
        return start, known, False
    if base is None:
        consumer = kafka.consumer(f"{app.config.app_id}-order-base", name="order-base")
        try:
            lookup = lambda t, p, s: recorded.get((t, p, s))  # noqa: E731
            start, base = base_from_history(consumer, InputTimes(app), entry, partition, lookup)
        finally:
            consumer.close()
    control.append(growth_base_record(topic, partition, start, base))
    return start, control.read().growth_bases[(topic, partition, start)], True


def _base(args: argparse.Namespace) -> int:
    app = load_app(args.app, args.config)
    kafka = Clients.of(app.config)
    try:
        start, base, written = order_base(app, kafka, args.topic, args.partition, args.base)
    finally:
        kafka.close()
    where = f"{args.topic}[{args.partition}] (its life from offset {start})"
    if written:
        print(f"published the base {base} of {where}: its processor applies it now")
    else:
        print(f"the control log records the base {base} of {where} already: nothing written")
    return 0
