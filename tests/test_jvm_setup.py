"""Missing Java, Maven or Kafka installs give errors that say how to fix them."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.ops.broker import JvmSetupError, find_java, kafka_classpath, resolve_jars
from framework.ops.broker.local import new_cluster_id


def test_missing_java_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JvmSetupError, match=r"Java was not found.*install Java 17"):
        find_java()


def test_old_java_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_home = tmp_path / "jdk11"
    (fake_home / "bin").mkdir(parents=True)
    java = fake_home / "bin" / "java"
    java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(fake_home))
    with pytest.raises(JvmSetupError, match=r"is Java 11; Kafka 4 needs Java 17"):
        find_java()


def test_missing_maven_suggests_kafka_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPLITSTATE_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    with pytest.raises(JvmSetupError, match=r"Maven \(`mvn`\) was not found.*KAFKA_HOME"):
        resolve_jars("kafka-broker")


def test_kafka_home_without_kafka_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KAFKA_HOME", str(tmp_path))
    with pytest.raises(JvmSetupError, match=r"KAFKA_HOME=.* has no libs/kafka_2.13"):
        kafka_classpath()


def test_kafka_home_is_used_instead_of_maven(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "libs").mkdir()
    (tmp_path / "libs" / "kafka_2.13-4.3.1.jar").write_bytes(b"")
    monkeypatch.setenv("KAFKA_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn: it must not be needed
    assert kafka_classpath() == str(tmp_path / "libs" / "*")


def test_cluster_ids_never_look_like_options() -> None:
    ids = [new_cluster_id() for _ in range(5000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)
