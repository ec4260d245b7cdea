"""All Spark: building processors' state in bulk from history, with the app's own function.

The job (``job``) is generic: it takes the history (Kafka offset ranges or a Parquet archive,
``sources``), a plan (which processors, how keys are placed and records ordered) and a
``Fold`` (the app's processor function, ``fold``), and publishes a directory of SST files plus
a manifest (``manifest``) that ``ProcessorDatabase.bulk_load`` ingests; a record that kills
the fold's process is skipped as the processors' crash guards skip it (``crash_watch``).
For an app that keeps time the history's ticks are read first (``tick_table``) and the fold
goes key by key, each key's records with the ticks of where it lives (``time_fold``,
``key_ticks``). For an app that orders its inputs canonically each record's mark is computed
first (``order_marks``), the build stops where the live loop would (``order_cut``) and each
key's records are folded in their canonical order.
``build`` runs it for an app after checking the history (``history``); ``backfill.backfill``
builds every processor (the ``splitstate backfill`` command); a joining processor with ``bootstrap:
spark`` runs it in a child process (``child_process`` starts and watches ``child_main``).
pyspark is imported only when a job runs; each name below is imported from its module when
first used (a processor imports ``child_process`` only, not the job's pyarrow).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from framework.bootstrap.backfill import BackfillResult
    from framework.bootstrap.build import BuildRequest, bootstrap_session, build_state
    from framework.bootstrap.child_process import (
        BootstrapRun,
        bootstrap_directory,
        read_bootstrap_progress,
    )
    from framework.bootstrap.errors import BootstrapError
    from framework.bootstrap.fold import AppFold
    from framework.bootstrap.job import BootstrapPlan, Fold, run_bootstrap, spark_errors
    from framework.bootstrap.manifest import MANIFEST_FILE, Manifest, ManifestError, TargetState
    from framework.bootstrap.progress import BootstrapProgress, progress_file_writer
    from framework.bootstrap.sources import (
        ARCHIVE_COLUMNS,
        ArchiveError,
        check_archive_columns,
        kafka_history,
        parquet_history,
        parquet_offsets,
    )
    from framework.bootstrap.spark_session import SparkSetupError, spark_session

__all__ = [
    "ARCHIVE_COLUMNS",
    "MANIFEST_FILE",
    "AppFold",
    "ArchiveError",
    "BackfillResult",
    "BootstrapError",
    "BootstrapPlan",
    "BootstrapProgress",
    "BootstrapRun",
    "BuildRequest",
    "Fold",
    "Manifest",
    "ManifestError",
    "SparkSetupError",
    "TargetState",
    "bootstrap_directory",
    "bootstrap_session",
    "build_state",
    "check_archive_columns",
    "kafka_history",
    "parquet_history",
    "parquet_offsets",
    "progress_file_writer",
    "read_bootstrap_progress",
    "run_bootstrap",
    "spark_errors",
    "spark_session",
]

#: where each name of ``__all__`` is defined
_MODULES = {
    "ARCHIVE_COLUMNS": "framework.bootstrap.sources",
    "AppFold": "framework.bootstrap.fold",
    "ArchiveError": "framework.bootstrap.sources",
    "BackfillResult": "framework.bootstrap.backfill",
    "BootstrapError": "framework.bootstrap.errors",
    "BootstrapPlan": "framework.bootstrap.job",
    "BootstrapProgress": "framework.bootstrap.progress",
    "BootstrapRun": "framework.bootstrap.child_process",
    "BuildRequest": "framework.bootstrap.build",
    "Fold": "framework.bootstrap.job",
    "MANIFEST_FILE": "framework.bootstrap.manifest",
    "Manifest": "framework.bootstrap.manifest",
    "ManifestError": "framework.bootstrap.manifest",
    "SparkSetupError": "framework.bootstrap.spark_session",
    "TargetState": "framework.bootstrap.manifest",
    "bootstrap_directory": "framework.bootstrap.child_process",
    "bootstrap_session": "framework.bootstrap.build",
    "build_state": "framework.bootstrap.build",
    "check_archive_columns": "framework.bootstrap.sources",
    "kafka_history": "framework.bootstrap.sources",
    "parquet_history": "framework.bootstrap.sources",
    "parquet_offsets": "framework.bootstrap.sources",
    "progress_file_writer": "framework.bootstrap.progress",
    "read_bootstrap_progress": "framework.bootstrap.child_process",
    "run_bootstrap": "framework.bootstrap.job",
    "spark_errors": "framework.bootstrap.job",
    "spark_session": "framework.bootstrap.spark_session",
}


def __getattr__(name: str) -> Any:
    """The name of ``__all__`` asked for, imported from its module on first use."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
