"""Starting a Spark session for bootstrap jobs: local by default, any master allowed.

The session gets Spark's Kafka source jars (resolved with Maven, like the broker's), the
Python that runs splitstate for its workers, and binds the driver to 127.0.0.1 when the master
is local. Every ``spark.*`` setting from the config passes through unchanged.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.bootstrap.errors import BootstrapError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkSetupError", "spark_session"]


class SparkSetupError(BootstrapError):
    """Spark cannot start: Java, the Kafka connector jars or the master is missing, or a
    session without the connector already runs in the process."""


def spark_session(
    app_name: str,
    master: str = "local[2]",
    settings: Mapping[str, Any] | None = None,
    jars: list[Path] | None = None,
    java_home: Path | None = None,
) -> SparkSession:
    """A Spark session for ``app_name`` on ``master`` with ``jars`` on its classpath."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 - pyspark starts a JVM; import late

    if java_home is not None:
        os.environ["JAVA_HOME"] = str(java_home)
    # Workers must run this interpreter (it has pandas, pyarrow and the app's modules).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    _share_python_path()
    missing = [str(jar) for jar in jars or [] if not jar.exists()]
    if missing:
        raise SparkSetupError(
            f"Spark's Kafka connector jars are missing: {missing}. Fix: run "
            "`splitstate jvm` (it fetches them with Maven; needs network), or remove the "
            "cache directory to resolve them again."
        )
    builder = SparkSession.builder.appName(app_name).master(master)
    defaults: dict[str, Any] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.sql.session.timeZone": "UTC",  # archives' timestamps without zone are UTC
    }
    if master.startswith("local"):
        defaults["spark.driver.bindAddress"] = "127.0.0.1"
        defaults["spark.driver.host"] = "127.0.0.1"
    if jars:
        defaults["spark.jars"] = ",".join(str(jar) for jar in jars)
    for key, value in {**defaults, **dict(settings or {})}.items():
        builder = builder.config(key, str(value))
    try:
        session = builder.getOrCreate()
    except Exception as error:  # the JVM failed to start: say what to check
        raise SparkSetupError(
            f"Spark could not start on master {master!r}: {error}. Fix: check that Java 17+ "
            "is installed (or JAVA_HOME points at it) and that spark.master is reachable."
        ) from error
    loaded = session.sparkContext.getConf().get("spark.jars", "") or ""
    if any(str(jar) not in loaded for jar in jars or []):
        raise SparkSetupError(
            "a Spark session already runs in this process without Spark's Kafka connector "
            "(other code started it before splitstate), and a running JVM cannot load it. "
            "Fix: run the backfill in a process of its own (`splitstate backfill MODULE:APP`), "
            "or stop that session (`spark.stop()`) first."
        )
    session.sparkContext.setLogLevel("WARN")
    return session


def _share_python_path() -> None:
    """Let workers import what the driver imports (the app's module, from the cwd too)."""
    entries = [str(Path.cwd()), *(p for p in sys.path if p)]
    known = os.environ.get("PYTHONPATH", "")
    merged = [*known.split(os.pathsep), *entries] if known else entries
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in merged if p))
