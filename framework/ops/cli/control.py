"""``splitstate control drop``: remove a control-log record that no reader can read."""

from __future__ import annotations

import argparse

from framework.coordination.control_log import ControlLog
from framework.kafka import Clients
from framework.loader import load_app
from framework.ops.cli._arguments import app_arguments
from rebalance.record_checks import shown

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``control`` subcommand."""
    control = commands.add_parser("control", help="repair the app's control log")
    actions = control.add_subparsers(dest="action", required=True, metavar="ACTION")
    drop = actions.add_parser(
        "drop",
        parents=[app_arguments()],
        help="remove the record at OFFSET, one that no reader can read (processors, status "
        "and scale name its offset when they stop at it); a record that can be read is "
        "never removed",
    )
    drop.add_argument("--offset", type=int, required=True, metavar="OFFSET")
    drop.set_defaults(handler=_drop)


def _drop(args: argparse.Namespace) -> int:
    app = load_app(args.app, args.config)
    topic = app.config.control_topic
    kafka = Clients.of(app.config)
    try:
        key = ControlLog(kafka, topic).drop(args.offset)
    finally:
        kafka.close()
    print(
        f"dropped the record at offset {args.offset} of control log {topic!r} (a tombstone of "
        f"its key {shown(key)}): processors, status and scale read past it now; start the "
        "processors that stopped at it again"
    )
    return 0
