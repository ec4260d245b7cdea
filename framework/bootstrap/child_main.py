"""``python -m framework.bootstrap.child_main DIRECTORY``: the child process of a Spark bootstrap.

Reads ``DIRECTORY/request.json`` (written by ``BootstrapRun``), builds the joining
processor's keys with Spark into ``DIRECTORY/output`` and reports progress into
``DIRECTORY/progress.json``. Exits 0 when the output is published, 2 with the reason on
stderr otherwise.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from framework.bootstrap.build import BuildRequest, build_state
from framework.bootstrap.progress import progress_file_writer
from framework.coordination.registry import TopicRegistry
from framework.errors import SplitstateError
from framework.kafka import Clients, watermarks
from framework.loader import load_app
from framework.redaction import RedactingFormatter, scrub
from rebalance.positions import OffsetRange
from statestore import StateStoreError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the bootstrap described in the directory given as the only argument."""
    args = sys.argv[1:] if argv is None else argv
    handler = logging.StreamHandler()  # stderr, as basicConfig's
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    directory = Path(args[0])
    request = json.loads((directory / "request.json").read_text())
    try:
        config_file = request["config_file"]
        app = load_app(request["app"], Path(config_file) if config_file else None)
        config = app.config
        kafka = Clients.of(config)
        registry = TopicRegistry(kafka).read()
        entries = {t.topic: registry[t.topic] for t in config.inputs}
        ranges = {(t, int(p)): OffsetRange(int(s), int(e)) for t, p, s, e in request["ranges"]}
        processor = int(request["processor"])
        build = BuildRequest(
            processors=int(request["processors"]),
            gained_from=(
                int(request["previous_processors"]),
                frozenset(int(s) for s in request["sources"]),
            ),
            covers={processor: [(t, int(p)) for t, p in request["covers"]]},
            ranges=ranges,
            retained=watermarks(kafka, ranges),
            entries=entries,
            archive=config.spark.archive,
            exact=False,
        )
        manifest = build_state(
            app, build, directory / "output", progress_file_writer(directory / "progress.json")
        )
    except (SplitstateError, StateStoreError) as error:
        print(scrub(f"splitstate bootstrap error: {error}"), file=sys.stderr)
        return 2
    target = manifest.targets[processor]
    print(
        f"bootstrap of processor {processor} done: {manifest.records_read} records read: "
        f"{manifest.records_applied} applied, {manifest.records_dead_lettered} dead letters "
        f"(not applied), the rest of other processors' keys or without a key; "
        f"{target.keys} keys"
    )
    for record in manifest.skipped:
        print(record.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
