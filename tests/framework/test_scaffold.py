"""``splitstate new NAME``: the app it writes loads, and its own test passes (issue 37 §2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from framework.errors import SplitstateError
from framework.loader import load_app
from framework.ops.cli import main
from framework.ops.scaffold import new_app


@pytest.fixture(autouse=True)
def _no_app_module_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test loads its own ``app.py`` as module ``app``: none outlives the test."""
    monkeypatch.delitem(sys.modules, "app", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))


def test_the_new_apps_test_passes_and_its_config_loads(tmp_path: Path) -> None:
    assert main(["new", "shop", "--directory", str(tmp_path)]) == 0
    directory = tmp_path / "shop"
    assert sorted(p.name for p in directory.iterdir()) == [
        "README.md",
        "__init__.py",
        "app.py",
        "config.yaml",
        "test_app.py",
    ]
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout
    app = load_app(f"{directory / 'app.py'}:app")
    config = app.config
    assert config.app_id == "shop"
    assert [t.topic for t in config.inputs] == ["shop-input"]
    assert [t.topic for t in config.outputs] == ["shop-counts"]


def test_two_new_apps_test_in_one_pytest_run(tmp_path: Path) -> None:
    """Both apps' ``test_app.py`` and ``app.py`` used to be top-level modules ``test_app`` and
    ``app``: pytest refused to collect the second (issue 37)."""
    for name in ("shop", "stock"):
        assert main(["new", name, "--directory", str(tmp_path)]) == 0
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "2 passed" in tested.stdout


@pytest.mark.parametrize("name", ["Shop", "1shop", "shop!", "my-shop", "", "a" * 65, "../up"])
def test_a_name_that_cannot_name_an_app_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(SplitstateError, match="is not an app name"):
        new_app(name, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_directory_with_files_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "app.py").write_text("mine\n")
    with pytest.raises(
        SplitstateError, match="exists and is not an empty directory: nothing was written"
    ):
        new_app("shop", tmp_path)
    assert (tmp_path / "shop" / "app.py").read_text() == "mine\n"


@pytest.mark.parametrize("name", ["on", "no", "null", "true"])
def test_a_name_yaml_reads_as_no_text_is_still_the_app_id(tmp_path: Path, name: str) -> None:
    directory = new_app(name, tmp_path)
    assert load_app(f"{directory / 'app.py'}:app").config.app_id == name


def test_a_directory_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "shop").write_text("a file\n")
    with pytest.raises(SplitstateError, match="exists and is not an empty directory"):
        new_app("shop", tmp_path)
    (tmp_path / "file").write_text("a file\n")
    with pytest.raises(SplitstateError, match="cannot write the app into"):
        new_app("shop", tmp_path / "file")


@pytest.mark.parametrize("name", ["json", "framework", "statestore", "pytest"])
def test_a_name_python_already_has_is_refused(tmp_path: Path, name: str) -> None:
    """Review: the app's package would hide (or be hidden by) that module: its test failed to
    import (``new json``: no module ``json.test_app``)."""
    with pytest.raises(SplitstateError, match="names a module Python already has"):
        new_app(name, tmp_path)
    assert list(tmp_path.iterdir()) == []
