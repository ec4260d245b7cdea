"""Building processors' state in bulk with Spark: read history, fold, write SST files.

The job is generic: it takes the history (Kafka offset ranges or a Parquet archive), a plan
(which processors, how keys are placed and records ordered) and a ``Fold`` (the app's own
processor function, supplied by ``framework``), and publishes a directory of SST files plus a
manifest that ``ProcessorDatabase.bulk_load`` ingests. pyspark is imported only when a job
runs.
"""

from statestore.spark.job import (
    BootstrapPlan,
    BootstrapProgress,
    Fold,
    progress_file_writer,
    run_bootstrap,
    spark_errors,
)
from statestore.spark.manifest import MANIFEST_FILE, Manifest, ManifestError, TargetState
from statestore.spark.session import SparkSetupError, spark_session
from statestore.spark.sources import (
    ARCHIVE_COLUMNS,
    ArchiveError,
    OffsetRange,
    check_archive_columns,
    kafka_history,
    parquet_history,
    parquet_offsets,
)

__all__ = [
    "ARCHIVE_COLUMNS",
    "MANIFEST_FILE",
    "ArchiveError",
    "BootstrapPlan",
    "BootstrapProgress",
    "Fold",
    "Manifest",
    "ManifestError",
    "OffsetRange",
    "SparkSetupError",
    "TargetState",
    "check_archive_columns",
    "kafka_history",
    "parquet_history",
    "parquet_offsets",
    "progress_file_writer",
    "run_bootstrap",
    "spark_errors",
    "spark_session",
]
