"""``splitstate broker start|stop|status`` and ``splitstate jvm``: the local Kafka broker."""

from __future__ import annotations

import argparse
from pathlib import Path

from framework.ops.broker import LocalBroker, find_java, kafka_classpath, spark_kafka_jars

__all__ = ["DEFAULT_BROKER_DIR", "register"]

DEFAULT_BROKER_DIR = Path(".splitstate") / "broker"
EXIT_NOT_RUNNING = 3


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``broker`` and ``jvm`` subcommands."""
    broker = commands.add_parser("broker", help="run a local single-node Kafka broker")
    actions = broker.add_subparsers(dest="action", required=True, metavar="ACTION")
    directory = _directory()

    start = actions.add_parser(
        "start", parents=[directory], help="start the broker (formats storage on first use)"
    )
    start.add_argument("--port", type=int, help="listener port (default: a free one)")
    start.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for it (default 120)"
    )
    start.set_defaults(handler=_start)

    stop = actions.add_parser(
        "stop", parents=[directory], help="stop the broker and wait for it to exit"
    )
    stop.set_defaults(handler=_stop)

    status = actions.add_parser(
        "status", parents=[directory], help="say whether the broker runs, and where"
    )
    status.set_defaults(handler=_status)

    jvm = commands.add_parser(
        "jvm", help="check Java and fetch the broker's and Spark's Kafka jars into the cache"
    )
    jvm.set_defaults(handler=_jvm)


def _directory() -> argparse.ArgumentParser:
    """A parent parser of ``--dir DIR``: which local broker."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_BROKER_DIR,
        help=f"broker directory: data, logs, settings (default {DEFAULT_BROKER_DIR})",
    )
    return parser


def _start(args: argparse.Namespace) -> int:
    broker = LocalBroker(args.dir)
    info = broker.start(port=args.port, timeout=args.timeout)
    print(f"broker running: pid {info.pid}, dir {broker.directory}, log {broker.log_file}")
    print(f"bootstrap.servers={info.bootstrap_servers}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    broker = LocalBroker(args.dir)
    stopped = broker.stop()
    if stopped is None:
        print(f"no broker runs from {broker.directory}")
    else:
        print(
            f"broker stopped: pid {stopped.pid}, was bootstrap.servers={stopped.bootstrap_servers}"
        )
    return 0


def _status(args: argparse.Namespace) -> int:
    broker = LocalBroker(args.dir)
    info = broker.status()
    if info is None:
        print(f"not running (dir {broker.directory})")
        return EXIT_NOT_RUNNING
    print(f"running: pid {info.pid}, dir {broker.directory}, log {broker.log_file}")
    print(f"bootstrap.servers={info.bootstrap_servers}")
    return 0


def _jvm(args: argparse.Namespace) -> int:
    java = find_java()
    print(f"java {java.major}: {java.executable}")
    print(f"kafka broker classpath: {kafka_classpath()}")
    jars = spark_kafka_jars()
    print(f"spark kafka jars: {len(jars)} in {jars[0].parent if jars else '-'}")
    return 0
