"""Find Java and Maven, and resolve the JVM jars splitstate runs.

Two jar sets are named by Maven poms kept in ``resources/``: the Apache Kafka broker and
Spark's Kafka source. Each is resolved once with ``mvn dependency:copy-dependencies`` into the
cache directory (``SPLITSTATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/splitstate``, else
``~/.cache/splitstate``) under a name that includes the pom's digest, so a changed pom resolves
anew and an unchanged one is reused. ``KAFKA_HOME`` pointing at an installed Kafka replaces
the broker jar set.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from framework.errors import SplitstateError

__all__ = [
    "JarSet",
    "JavaRuntime",
    "JvmSetupError",
    "cache_dir",
    "find_java",
    "kafka_classpath",
    "resolve_jars",
    "spark_kafka_jars",
]

JarSet = Literal["kafka-broker", "spark-kafka"]
MIN_JAVA_MAJOR = 17
_COMPLETE_MARKER = ".complete"


class JvmSetupError(SplitstateError):
    """Java, Maven or a jar set is missing or broken."""


@dataclass(frozen=True)
class JavaRuntime:
    """A usable ``java`` executable and its major version."""

    executable: Path
    major: int


def cache_dir() -> Path:
    """The directory where splitstate keeps resolved jars and other rebuildable files."""
    configured = os.environ.get("SPLITSTATE_CACHE_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "splitstate").resolve()


def find_java() -> JavaRuntime:
    """Locate Java 17+ (``JAVA_HOME`` first, then ``PATH``) or explain how to install it."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    if candidate is None or not candidate.exists():
        found = shutil.which("java")
        candidate = Path(found) if found else None
    if candidate is None:
        raise JvmSetupError(
            "Java was not found (needed to run the Kafka broker and Spark). "
            "Fix: install Java 17 or newer (e.g. `apt-get install openjdk-17-jdk-headless`) "
            "or set JAVA_HOME to a JDK 17+."
        )
    result = subprocess.run(
        [str(candidate), "-version"], capture_output=True, text=True, check=False
    )
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if not match:
        raise JvmSetupError(
            f"Could not read the version of {candidate}: {result.stderr.strip()[:300]}. "
            "Fix: point JAVA_HOME at a working JDK 17 or newer."
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8" style
        major = int(match.group(2))
    if major < MIN_JAVA_MAJOR:
        raise JvmSetupError(
            f"{candidate} is Java {major}; Kafka 4 needs Java {MIN_JAVA_MAJOR} or newer. "
            "Fix: install Java 17+ and put it first on PATH, or set JAVA_HOME to it."
        )
    return JavaRuntime(executable=candidate, major=major)


_DESCRIPTIONS: dict[str, str] = {
    "kafka-broker": "the Kafka broker",
    "spark-kafka": "Spark's Kafka connector (spark-sql-kafka, used to read topics)",
}


def _pom_path(jar_set: JarSet) -> Path:
    pom = resources.files("framework") / "resources" / f"{jar_set}.pom.xml"
    return Path(str(pom))


def resolve_jars(jar_set: JarSet) -> Path:
    """Return the directory holding ``jar_set``'s jars, resolving them with Maven if needed."""
    pom = _pom_path(jar_set)
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    target = cache_dir() / "jvm" / f"{jar_set}-{digest}"
    if (target / _COMPLETE_MARKER).exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        hint = " or set KAFKA_HOME to an installed Kafka 4.x" if jar_set == "kafka-broker" else ""
        raise JvmSetupError(
            f"Maven (`mvn`) was not found; it is needed once to fetch the jars of "
            f"{_DESCRIPTIONS[jar_set]}. "
            f"Fix: install Maven (e.g. `apt-get install maven`){hint}."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{jar_set}-", dir=target.parent))
    command = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise JvmSetupError(
            f"Maven could not resolve the {jar_set} jars from {pom}:\n{tail}\n"
            "Fix: check that Maven Central is reachable (proxy settings in ~/.m2/settings.xml)."
        )
    (staging / _COMPLETE_MARKER).write_text(" ".join(command) + "\n")
    try:
        staging.rename(target)
    except OSError:
        # Another process finished first: its complete copy wins.
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / _COMPLETE_MARKER).exists():
            raise
    return target


def kafka_classpath() -> str:
    """The Java classpath of the Kafka broker: ``$KAFKA_HOME/libs`` or the resolved jars."""
    kafka_home = os.environ.get("KAFKA_HOME")
    if kafka_home:
        libs = Path(kafka_home).expanduser() / "libs"
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise JvmSetupError(
                f"KAFKA_HOME={kafka_home} has no libs/kafka_2.13-*.jar. "
                "Fix: point KAFKA_HOME at an unpacked Apache Kafka 4.x, or unset it to let "
                "splitstate fetch the broker with Maven."
            )
        return str(libs / "*")
    return str(resolve_jars("kafka-broker") / "*")


def spark_kafka_jars() -> list[Path]:
    """The jars of Spark's Kafka source, for ``spark.jars``."""
    return sorted(resolve_jars("spark-kafka").glob("*.jar"))
