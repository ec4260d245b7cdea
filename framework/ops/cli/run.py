"""``splitstate run``, ``splitstate topics create`` and ``splitstate status``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from framework.coordination.app_topics import (
    INPUT_RETENTION_MS,
    check_input_retention,
    input_and_output_specs,
    minimum_input_retention_ms,
)
from framework.coordination.progress_reports import progress_topic_spec
from framework.coordination.registry import TopicEntry, TopicRegistry
from framework.coordination.scaling import abort_scale, request_scale, resume_scale
from framework.kafka import COMPACTED, Clients, TopicSpec
from framework.loader import load_app
from framework.ops.cli._arguments import app_arguments
from framework.ops.logs import default_log_format, setup_logging
from framework.ops.processor_id import ENV_VARIABLE, resolve_processor_id
from framework.ops.progress import CatchUpProgress
from framework.ops.status import collect_status
from framework.ops.status_view import render_status
from framework.ops.supervisor import EXIT_STOPPED_BY_POLICY, Supervisor
from framework.ops.topic_status import history_line
from framework.processing import ProcessorStoppedError
from framework.runtime.log_context import LOG_CONTEXT
from framework.runtime.loop import ProcessorRuntime
from framework.tables.topics import table_topic_configs

__all__ = ["INPUT_RETENTION_MS", "check_input_retention", "minimum_input_retention_ms", "register"]

log = logging.getLogger("splitstate")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``run``, ``topics``, ``scale`` and ``status`` subcommands."""
    app = app_arguments()
    run = commands.add_parser("run", parents=[app], help="run processors of an app")
    which = run.add_mutually_exclusive_group()
    which.add_argument(
        "--processor-id",
        type=int,
        metavar="J",
        help="run processor J here (default: SPLITSTATE_PROCESSOR_ID: J, or `ordinal` for a "
        "StatefulSet pod's ordinal)",
    )
    which.add_argument(
        "--all", action="store_true", help="run every processor under a local supervisor"
    )
    # set by `run --all` for the processors it starts: their first log line says so
    run.add_argument("--supervised", action="store_true", help=argparse.SUPPRESS)
    run.set_defaults(handler=_run)

    topics = commands.add_parser("topics", help="manage an app's Kafka topics")
    actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        parents=[app],
        help="create the app's inputs, outputs, dead letters and control log",
    )
    create.set_defaults(handler=_create_topics)

    scale = commands.add_parser(
        "scale",
        parents=[app],
        help="change the processor count (live, with the catch-up protocol)",
    )
    target = scale.add_mutually_exclusive_group(required=True)
    target.add_argument("--processors", type=int, metavar="P", help="the new processor count")
    target.add_argument(
        "--abort",
        action="store_true",
        help="abandon the scale in progress (old owners keep their partitions)",
    )
    target.add_argument(
        "--resume",
        action="store_true",
        help="end the stop of the scale's stopped receivers, once fixed and restarted",
    )
    scale.add_argument(
        "--processor",
        type=int,
        metavar="J",
        help="with --resume: only processor J",
    )
    scale.add_argument(
        "--reason", default="aborted by an operator", help="why (shown by status; with --abort)"
    )
    scale.set_defaults(handler=_scale)

    status = commands.add_parser(
        "status",
        parents=[app],
        help="processors, partitions, state size, lag and key share of an app",
    )
    status.add_argument(
        "--watch",
        action="store_true",
        help="refresh until Ctrl-C: a live table on a terminal, a plain report per refresh "
        "otherwise",
    )
    status.add_argument(
        "--interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="seconds between refreshes with --watch (default 2)",
    )
    status.set_defaults(handler=_status)


def _logging(args: argparse.Namespace, processor: int | None) -> str:
    """Log in the format asked for (``--log-format``, ``SPLITSTATE_LOG_FORMAT``); returns it."""
    log_format = args.log_format or default_log_format()
    setup_logging(log_format, processor=processor)
    return log_format


def _run(args: argparse.Namespace) -> int:
    processor, source = (
        (None, "")
        if args.all
        else resolve_processor_id(args.processor_id, os.environ, supervised=args.supervised)
    )
    log_format = _logging(args, processor)
    app = load_app(args.app, args.config)
    LOG_CONTEXT.app = app.config.app_id
    if processor is None:
        if os.environ.get(ENV_VARIABLE) is not None:
            log.warning("%s is set, but --all runs every processor: it is not used", ENV_VARIABLE)
        config_file = args.config or app.config_file
        return Supervisor(app, args.app, config_file, log_format=log_format).run()
    log.info("running processor %d of %s (id from %s)", processor, app.config.app_id, source)
    runtime = ProcessorRuntime(app, processor)
    runtime.install_signal_handlers()
    try:
        stats = runtime.run()
    except ProcessorStoppedError as error:
        log.error("%s", error)
        return EXIT_STOPPED_BY_POLICY
    log.info(
        "processor %d stopped: %d records, %d outputs, %d dead letters",
        processor,
        stats.records,
        stats.outputs,
        stats.dead_letters,
    )
    return 0


def _create_topics(args: argparse.Namespace) -> int:
    app = load_app(args.app, args.config)
    config = app.config
    check_input_retention(config)
    kafka = Clients.of(config)
    specs = input_and_output_specs(config, table_topic_configs(app))
    specs.append(TopicSpec(config.dead_letters, 1))
    specs.append(TopicSpec(config.control_topic, 1, config=COMPACTED))
    specs.append(progress_topic_spec(config.progress_topic))
    created = kafka.create_topics(specs)
    registry = TopicRegistry(kafka)
    registry.ensure_topic()
    entries = {
        topic.topic: registry.register(
            topic.topic,
            topic.partitions,
            config.key_hash,
            topic.producer_lease_ms,
            topic.producer_delivery_timeout_ms,
        )
        for topic in [*config.inputs, *config.outputs]
    }
    for spec in specs:
        state = "created" if spec.name in created else "exists"
        entry = entries.get(spec.name)
        print(f"{spec.name:<40} {state}{'' if entry is None else _partitions(entry)}")
    return 0


def _partitions(entry: TopicEntry) -> str:
    """`` partitions 4 -> 8 -> 5 (deleted 5..7)``, and a change in progress."""
    change = entry.growth or entry.announced
    going = (
        ""
        if change is None
        else f"; {'shrinking' if change.kind == 'shrink' else 'growing'} to "
        f"{change.partitions}{' (announced)' if entry.announced else ''} (`splitstate expand` "
        "running, or run it again to resume)"
    )
    return f"  partitions {history_line(entry.history)}{going}"


def _status(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        print(
            f"splitstate: error: --interval {args.interval:g} must be above 0 seconds. Fix: "
            "pass e.g. --interval 2",
            file=sys.stderr,
        )
        return 2
    app = load_app(args.app, args.config)
    if args.watch:
        # rich only here: `splitstate run` must not pay for importing it
        from framework.ops.status_watch import watch_status  # noqa: PLC0415
        from framework.ops.terminal import terminal  # noqa: PLC0415

        return watch_status(lambda: collect_status(app), terminal(), args.interval)
    status = collect_status(app)
    print(render_status(status))
    if status.scaling_to is not None:
        progress = CatchUpProgress()
        progress.update(status)
        time.sleep(2.0)  # a second sample gives records/s and an ETA (reports: every 2 s)
        print("\ncatch-up progress:")
        for line in progress.update(collect_status(app)):
            print("  " + line.render())
    return 0


def _scale(args: argparse.Namespace) -> int:
    app = load_app(args.app, args.config)
    if args.abort:
        aborted = abort_scale(app, args.reason)
        print(
            f"generation {aborted.generation} ({aborted.old_processors} -> "
            f"{aborted.new_processors} processors) aborted: {aborted.aborted}. The old owners "
            "keep their partitions; joining processors drop what they built and stop."
        )
        return 0
    if args.resume:
        resumed = resume_scale(app, args.processor, now=time.time())
        print(
            f"resumed processors {resumed}: their sources release to them again once they are "
            "caught up; watch `splitstate status`"
        )
        return 0
    scale = request_scale(app, args.processors)
    moves = ", ".join(
        f"{h.source}->{h.target} {sorted(f'{t}[{p}]' for t, p in h.partitions)}"
        for h in scale.handoffs.values()
    )
    print(
        f"generation {scale.generation}: {scale.old_processors} -> {scale.new_processors} "
        f"processors; moves: {moves}"
    )
    print("processors started by `splitstate run --all` pick it up; watch `splitstate status`")
    return 0
