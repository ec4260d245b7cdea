"""``splitstate tail``: an app's outputs or dead letters as they are written, decoded.

It reads ``read_committed`` (what a downstream consumer sees: never a record of an open or
aborted transaction), from the end of each partition (``--from-beginning``: from the first
record), following until Ctrl-C (or ``--max-records``, ``--idle-seconds``), and reads partitions the
topic gains while it runs from their first record. It joins no
consumer group and commits nothing. A value is shown as JSON when it is JSON, else as text,
else as bytes; a dead letter (a record with a ``splitstate.stage`` header) shows its stage,
its error and the input record it came from. Everything read is untrusted: what is not
printable is shown escaped (``framework.ops.escape``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TextIO

import orjson

from framework.config import AppConfig
from framework.config_client import KafkaClientConfig
from framework.errors import SplitstateError
from framework.kafka import Clients, KafkaIOError, Message
from framework.kafka.settings_check import check_kafka_settings
from framework.loader import load_app
from framework.ops.escape import printable
from framework.records import readable_headers

__all__ = ["format_record", "register"]

log = logging.getLogger("splitstate")

_ORIGIN = ("splitstate.topic", "splitstate.partition", "splitstate.offset")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``tail`` subcommand."""
    tail = commands.add_parser(
        "tail",
        help="print a topic's records as they are written (an app's outputs, dead letters)",
    )
    tail.add_argument(
        "target",
        metavar="TOPIC | MODULE:APP",
        help="a topic, or an app (MODULE:APP or FILE.py:APP): its output topic (the only "
        "one, or --topic), or with --dead-letters its dead-letter topic",
    )
    tail.add_argument(
        "--config",
        help="the app's config file (YAML or TOML); for a TOPIC, its kafka section says how to "
        "reach the broker (security settings too), as SPLITSTATE_KAFKA__* variables do",
    )
    tail.add_argument("--topic", help="which of the app's output topics")
    tail.add_argument("--dead-letters", action="store_true", help="the app's dead-letter topic")
    tail.add_argument(
        "--from-beginning", action="store_true", help="from each partition's first record"
    )
    tail.add_argument("--max-records", type=int, metavar="N", help="stop after N records")
    tail.add_argument(
        "--idle-seconds", type=float, metavar="S", help="stop when nothing came for S seconds"
    )
    tail.add_argument(
        "--bootstrap-servers",
        help="the broker, for a TOPIC (default: --config's kafka.bootstrap_servers, overridden "
        "by $SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS, else $KAFKA_BOOTSTRAP_SERVERS, else "
        "127.0.0.1:9092)",
    )
    tail.set_defaults(handler=_tail)


def _tail(args: argparse.Namespace) -> int:
    topic, clients = _source(args)
    counts = clients.partition_counts([topic])
    if topic not in counts:
        raise SplitstateError(
            f"there is no topic {topic!r} on the broker. Fix: name an existing topic (an app "
            "creates its topics with `splitstate topics create MODULE:APP`)"
        )
    positions = [(topic, partition) for partition in range(counts[topic])]
    consumer = clients.consumer(f"splitstate-tail-{uuid.uuid4().hex}", name="tail")
    read = counts[topic]

    def new_partitions() -> None:
        """Read the partitions the topic gained since, each from its first record (the
        broker not answering now: at the next check)."""
        nonlocal read
        try:
            now = clients.partition_counts([topic]).get(topic, read)
        except KafkaIOError as error:
            log.warning("tail: could not look for new partitions of %s: %s", topic, error)
            return
        if now > read:
            consumer.add({(topic, partition): None for partition in range(read, now)})
            read = now

    try:
        if args.from_beginning:
            consumer.assign(dict.fromkeys(positions))
        else:
            ends = consumer.watermarks(positions)
            consumer.assign({position: ends[position].end for position in positions})
        print(f"reading {topic} ({read} partitions)", file=sys.stderr, flush=True)
        _follow(consumer.consume, args.max_records, args.idle_seconds, sys.stdout, new_partitions)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # (`splitstate tail ... | head`: the reader has gone)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (Python's own advice)
    finally:
        consumer.close()
    return 0


def _source(args: argparse.Namespace) -> tuple[str, Clients]:
    """The topic to read, and clients of its cluster."""
    target: str = args.target
    if ":" not in target:  # a topic (Kafka topic names have no ':')
        if args.topic or args.dead_letters:
            raise SplitstateError(
                f"--topic and --dead-letters need an app, but {target!r} is a topic. Fix: name "
                "the app (MODULE:APP) instead, or leave them out"
            )
        kafka = KafkaClientConfig.load(None if args.config is None else Path(args.config))
        if args.bootstrap_servers:
            kafka = kafka.model_copy(update={"bootstrap_servers": args.bootstrap_servers})
        check_kafka_settings(kafka.settings)
        return target, Clients(kafka.client_settings())
    app = load_app(target, None if args.config is None else Path(args.config))
    config: AppConfig = app.config
    if args.dead_letters:
        return config.dead_letters, Clients.of(config)
    written = [output.topic for output in config.outputs]
    if args.topic is not None and args.topic not in written:
        raise SplitstateError(
            f"app {config.app_id!r} writes no topic {args.topic!r}. Fix: --topic one of "
            f"{written}, or --dead-letters"
        )
    if args.topic is None and len(written) != 1:
        raise SplitstateError(
            f"app {config.app_id!r} writes several topics {written}. Fix: pick one with --topic"
        )
    return args.topic or written[0], Clients.of(config)


#: how often ``tail`` looks for partitions its topic gained
GROWTH_CHECK_SECONDS = 5.0


def _follow(
    consume: _Consume,
    most: int | None,
    idle_seconds: float | None,
    out: TextIO,
    new_partitions: Callable[[], None] = lambda: None,
) -> None:
    """Print what ``consume`` gives until ``most`` records or ``idle_seconds`` without any,
    calling ``new_partitions`` every ``GROWTH_CHECK_SECONDS``."""
    shown = 0
    last = checked = time.monotonic()
    while most is None or shown < most:
        if time.monotonic() - checked >= GROWTH_CHECK_SECONDS:
            new_partitions()
            checked = time.monotonic()
        records = consume(min(500, most - shown) if most is not None else 500, 0.5)
        for record in records:
            print(format_record(record), file=out, flush=True)
        shown += len(records)
        now = time.monotonic()
        if records:
            last = now
        elif idle_seconds is not None and now - last >= idle_seconds:
            return


class _Consume(Protocol):
    def __call__(self, max_records: int, timeout: float, /) -> Sequence[Message]: ...


def format_record(record: Message) -> str:
    """One line for ``record``: where it is, its key and value decoded; for a dead letter,
    its stage, error and origin too. Nothing of it reaches the terminal unescaped."""
    where = f"{record.topic()}[{record.partition()}]@{record.offset()}"
    readable = readable_headers(record)  # (a name that is not text: never headers() itself)
    headers = {name: value for name, value in readable or () if value is not None}
    key = record.key()
    shown_key = "" if key is None else f" key {_text(key)}"
    stage = headers.get("splitstate.stage")
    if stage is None:
        unreadable = " (headers unreadable: a name that is not UTF-8)" if readable is None else ""
        return printable(f"{where}{shown_key}{unreadable}: {_value(record.value())}")
    origin = "{}[{}]@{}".format(*(_decoded(headers.get(name, b"?")) for name in _ORIGIN))
    error = _decoded(headers.get("splitstate.error", b""))
    return printable(
        f"{where} dead letter, stage {_decoded(stage)}, of {origin}{shown_key}: {error} | "
        f"value: {_value(record.value())}"
    )


def _value(value: bytes | None) -> str:
    if value is None:
        return "(tombstone)"
    try:
        return orjson.dumps(orjson.loads(value)).decode()
    except orjson.JSONDecodeError:
        return _text(value)


def _text(data: bytes) -> str:
    try:
        return repr(data.decode())
    except UnicodeDecodeError:
        return repr(data)


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "replace")
