"""``splitstate expand``: grow or shrink input topics' partitions in order (KIP-253, client
side)."""

from __future__ import annotations

import argparse
import sys

from framework.config import ConfigError
from framework.coordination.control_log import ControlLog
from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.coordination.scaling import read_control
from framework.growth.expand import expand_topic
from framework.kafka import Clients
from framework.loader import load_app
from framework.ops.cli._arguments import app_arguments
from rebalance.control_records import InputGrowth

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``expand`` subcommand."""
    parser = commands.add_parser(
        "expand",
        parents=[app_arguments()],
        help="grow or shrink an input topic's partitions without moving keys between processors",
        description=(
            "Growth: create partitions (or re-use deleted ones), record the new count, wait "
            "out producers' leases, write marker records in the parents and record them. "
            "Shrink (never below the initial count or the processor count): record the new "
            "count, wait out producers' leases, write a drain marker in each deleted partition "
            "(Kafka keeps them) and record them. Keys never change processor; records of a "
            "key are processed in the order produced. Resumable: run it again after a crash. "
            "Without --topic/--partitions, changes every input to its configured count."
        ),
    )
    parser.add_argument("--topic", help="the input topic to grow or shrink")
    parser.add_argument("--partitions", type=int, metavar="M", help="the new partition count")
    parser.set_defaults(handler=_expand)


def _unrecorded_hold(app: str, topic: str, held: InputGrowth, recorded: TopicEntry) -> str:
    """Why the config cannot be carried out: the control log holds a change of ``topic``
    that the registry never recorded, to another count than the config's."""
    return (
        f"the app's control log holds a change of {topic!r} to {held.partitions} partitions "
        f"(an `expand` that stopped, or still runs, before it recorded anything: the topic "
        f"registry records {recorded.partitions}), and the config asks for another count. "
        "No scale or other change can start until that change is carried out. Fix: carry it "
        f"out with `splitstate expand {app} --topic {topic} --partitions {held.partitions}`, "
        "then set the config to the count you want and run `splitstate expand` again."
    )


def _report(line: str) -> None:
    print(line, flush=True)


def _expand(args: argparse.Namespace) -> int:
    app = load_app(args.app, args.config)
    config = app.config
    kafka = Clients.of(config)
    state = read_control(app, kafka)
    scale = state.scaling
    if scale is not None:
        raise ConfigError(
            f"app {config.app_id!r} is scaling to {scale.new_processors} processors "
            f"(generation {scale.generation}); changing its inputs' partition counts now "
            "would leave partitions out of the handoffs. Fix: wait until the scale completes "
            "(`splitstate status`), then expand."
        )
    control = ControlLog(kafka, config.control_topic)
    inputs = {t.topic: t.partitions for t in config.inputs}
    if (args.topic is None) != (args.partitions is None):
        print(
            "splitstate: error: give both --topic and --partitions, or neither (to change "
            "every input to its configured partitions)",
            file=sys.stderr,
        )
        return 2
    if args.topic is not None:
        if args.topic not in inputs:
            raise ConfigError(
                f"{args.topic!r} is not an input topic of app {config.app_id!r} (inputs: "
                f"{sorted(inputs)}). Fix: name one of them."
            )
        wanted = {args.topic: args.partitions}
    else:
        known = TopicRegistry(kafka).read()
        growth = state.growth
        unfinished = growth.topic if growth is not None else None
        wanted = {
            topic: count
            for topic, count in inputs.items()
            if topic in known
            and (count != known[topic].partitions or known[topic].changing or topic == unfinished)
        }
        if growth is not None and growth.topic in wanted:
            recorded = known[growth.topic]
            if not recorded.changing and recorded.partitions != growth.partitions:
                if wanted[growth.topic] != growth.partitions:
                    raise ConfigError(_unrecorded_hold(args.app, growth.topic, growth, recorded))
            elif wanted[growth.topic] == recorded.partitions:
                wanted[growth.topic] = growth.partitions  # only its release is left
        if not wanted:
            print("every input already has its configured partitions; nothing to do")
            return 0
    # rich only here: `splitstate run` must not pay for importing it
    from framework.ops.bars import ProgressView, wait_with_countdown  # noqa: PLC0415
    from framework.ops.terminal import terminal  # noqa: PLC0415

    with ProgressView(terminal(sys.stderr), clock=kafka.clock) as view:

        def fence_wait(seconds: float) -> None:
            wait_with_countdown(view, "fence wait", seconds)

        for topic, count in wanted.items():
            entry = expand_topic(
                kafka, topic, count, control=control, report=_report, wait=fence_wait
            )
            counts = " -> ".join(str(c) for c in entry.history.counts)
            print(f"{topic}: partitions {counts}", flush=True)
    return 0
