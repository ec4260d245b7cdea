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
``build`` runs it for an app after checking the history (``history``); ``backfill`` builds
every processor (the ``splitstate backfill`` command); a joining processor with ``bootstrap:
spark`` runs it in a child process (``child_process`` starts and watches ``child_main``).
pyspark is imported only when a job runs.
"""

from framework.bootstrap.backfill import BackfillResult, backfill
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
    "backfill",
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
