"""examples/kubernetes: the manifests parse, the ConfigMap holds a valid app config whose every
field the docs' config reference documents, and the StatefulSet's environment names only
config fields (or the framework's own variables) and the ports and paths the processors use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from framework.config import AppConfig
from framework.config_checks import check_environment
from framework.ops.reference import config_fields

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "kubernetes"


def _documents() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            found[document["kind"]] = document
    return found


def _fields(data: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted names of the config's fields (lists of topics count as their field)."""
    names = set()
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and key not in ("settings", "kafka_options"):
            names |= _fields(value, f"{name}.")
        else:
            names.add(name)
    return names


def _config() -> dict[str, Any]:
    text = _documents()["ConfigMap"]["data"]["config.yaml"]
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def _container() -> dict[str, Any]:
    statefulset = _documents()["StatefulSet"]
    containers: list[dict[str, Any]] = statefulset["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def test_the_manifests_are_a_statefulset_a_headless_service_and_a_configmap() -> None:
    documents = _documents()
    assert sorted(documents) == ["ConfigMap", "Service", "StatefulSet"]
    service, statefulset = documents["Service"], documents["StatefulSet"]
    assert service["spec"]["clusterIP"] == "None"
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert statefulset["spec"]["selector"]["matchLabels"] == labels
    assert service["spec"]["selector"] == labels


def test_the_configmap_holds_a_valid_config_the_readme_documents() -> None:
    data = _config()
    config = AppConfig(**data)
    assert config.snapshots.url is not None  # every host reaches the same store
    # the config reference is generated from these (tests/test_docs.py: every field, on the page)
    documented = {field.path for field in config_fields() if field.description}
    assert _fields(data) <= documented, _fields(data) - documented
    kubernetes = (ROOT / "docs" / "how-to" / "kubernetes.md").read_text()
    for field in sorted(_fields(data)):
        assert f"`{field}`" in kubernetes, field  # the docs list what the ConfigMap sets


def test_the_statefulset_names_only_known_settings_and_the_mounted_config() -> None:
    container = _container()
    environment = {e["name"]: e.get("value", "") for e in container["env"]}
    assert check_environment(AppConfig, environment) == []
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    args = container["args"]
    config_path = args[args.index("--config") + 1]
    assert config_path.startswith(mounts["config"] + "/")
    assert Path(_config()["state_dir"]).is_relative_to(mounts["state"])
    assert "--processor-id" not in args  # the pod's ordinal is its id
    assert environment["SPLITSTATE_PROCESSOR_ID"] == "ordinal"
