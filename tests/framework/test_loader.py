"""``load_app``: a ``MODULE:APP`` that cannot be loaded is named with what went wrong and
the fix (found by a new user: a misspelt attribute was "NoneType, not a splitstate App", and a
module importing a missing package was told to run from the directory that holds it)."""

from __future__ import annotations

import importlib.machinery
import subprocess
import sys
import types
import uuid
from pathlib import Path

import pytest

from framework import App
from framework.errors import SplitstateError
from framework.loader import load_app

APP_MODULE = """
from framework import App

app = App()
other = App()
limit = 3
"""


def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> str:
    """A new module holding ``text``, importable from the current directory."""
    name = f"user_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_an_attribute_the_module_lacks_is_named_with_the_apps_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = module(tmp_path, monkeypatch, APP_MODULE)
    with pytest.raises(SplitstateError) as raised:
        load_app(f"{name}:ap")
    message = str(raised.value)
    assert f"module {name!r} has no attribute 'ap'" in message, message
    assert f"{name}:app" in message and f"{name}:other" in message, message
    assert "NoneType" not in message


def test_an_attribute_that_is_no_app_says_what_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = module(tmp_path, monkeypatch, APP_MODULE)
    with pytest.raises(SplitstateError, match=rf"{name}\.limit is int, not a splitstate App"):
        load_app(f"{name}:limit")
    assert load_app(f"{name}:app").spec == f"{name}:app"


def test_a_missing_package_imported_by_the_module_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = module(tmp_path, monkeypatch, "import os\nimport notapackage_xyz  # needed\n")
    with pytest.raises(SplitstateError) as raised:
        load_app(f"{name}:app")
    message = str(raised.value)
    assert "'notapackage_xyz'" in message and f"{name}.py:2" in message, message
    assert "install" in message
    assert "run from the directory" not in message


def test_a_module_that_is_not_found_says_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec in ("no_such_module_q:app", "no_such_package_q.app:app"):
        with pytest.raises(SplitstateError) as raised:
            load_app(spec)
        message = str(raised.value)
        assert f"cannot find module {spec.partition(':')[0]!r}" in message, message
        assert "run from the directory that holds it" in message


def test_a_file_path_loads_from_any_directory_with_the_files_own_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    helper = f"helper_{uuid.uuid4().hex[:8]}"
    (project / f"{helper}.py").write_text("LIMIT = 7\n")
    (project / "my_app.py").write_text(f"from {helper} import LIMIT\n{APP_MODULE}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "my_app", raising=False)
    app = load_app("../project/my_app.py:other")
    # the spec is absolute, so child processes (the supervisor's, Spark's) find it from anywhere
    assert app.spec == f"{(project / 'my_app.py').resolve()}:other"
    assert load_app(app.spec) is app  # imported once
    with pytest.raises(
        SplitstateError, match=r"'my_app\.py' has no attribute 'ap'.*my_app\.py:app"
    ):
        load_app("../project/my_app.py:ap")
    other = tmp_path / "other"
    other.mkdir()
    (other / "my_app.py").write_text(APP_MODULE)
    with pytest.raises(SplitstateError, match=r"as module 'my_app': that name is already another"):
        load_app(f"{other / 'my_app.py'}:app")  # (a second my_app would replace the first)
    assert load_app(app.spec) is app


def test_a_missing_file_is_named_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SplitstateError, match=r"cannot find the file .*nowhere\.py"):
        load_app("nowhere.py:app")


def test_app_run_outside_its_script_says_how_to_run_it() -> None:
    """``app.run()`` runs the App of the script Python runs; pytest's is no such script."""
    with pytest.raises(SplitstateError, match=r"splitstate run MODULE:APP"):
        App().run([])


def test_a_file_named_like_another_module_is_refused_and_that_module_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file ``json.py`` (or ``rebalance.py``) imported under its stem would be what every
    later ``import json`` gets, in each of the app's processes."""
    (tmp_path / "json.py").write_text(APP_MODULE)
    (tmp_path / "secrets.py").write_text(APP_MODULE)  # (not imported yet: found all the same)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for stem in ("json", "secrets"):
        with pytest.raises(SplitstateError, match=rf"as module '{stem}': that name is already"):
            load_app(f"{tmp_path / stem}.py:app")
    import json  # noqa: PLC0415 - imported after the refusal, on purpose

    assert json.dumps([1]) == "[1]"


def test_the_script_python_runs_is_imported_by_its_name_as_the_apps_processes_do(
    tmp_path: Path,
) -> None:
    """``python app.py``: the app is the one every other process imports (by the file's name),
    so a function that another module registers on ``from app import app`` is there too."""
    (tmp_path / "handlers.py").write_text(
        "from app import app\n\n\n@app.processor()\ndef count(record, state):\n    return None\n"
    )
    (tmp_path / "app.py").write_text(
        "from framework import App\n\napp = App(app_id='shop', inputs=['orders'])\n"
        "import handlers  # noqa: E402, F401\n\n"
        "if __name__ == '__main__':\n"
        "    from framework.loader import load_app\n\n"
        "    loaded = load_app(__file__ + ':app')\n"
        "    print(sorted(loaded.handlers), loaded is app)\n"
    )
    ran = subprocess.run(
        [sys.executable, "app.py"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["['*']", "False"], ran.stdout


def test_app_run_under_python_m_names_the_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m package.app``: the processes import ``package.app`` (its relative imports
    work), not the file as a top-level module."""
    script = types.ModuleType("__main__")
    script.__file__ = "/somewhere/package/app.py"
    script.__spec__ = importlib.machinery.ModuleSpec("package.app", None)
    app = App()
    script.app = app  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert app._script_spec() == "package.app:app"
    del script.__spec__
    script.__spec__ = None
    assert app._script_spec() == "/somewhere/package/app.py:app"


def test_an_app_that_runs_itself_names_its_script_in_its_usage_and_errors(
    tmp_path: Path,
) -> None:
    """``python app.py --help`` said ``usage: splitstate run MODULE:APP`` (issue 37): the
    script's usage is its own, without the ``APP`` that ``app.run()`` fills in."""
    (tmp_path / "app.py").write_text(
        "from framework import App\n\napp = App(app_id='shop', inputs=['orders'])\n\n"
        "if __name__ == '__main__':\n    app.run()\n"
    )

    def script(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "app.py", *arguments],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )

    helped = script("--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: python app.py [-h]"), helped.stdout
    assert "--processor-id J" in helped.stdout and "--all" in helped.stdout
    assert "MODULE:APP" not in helped.stdout and "splitstate" not in helped.stdout
    refused = script("--processors", "3")
    assert refused.returncode == 2
    assert "python app.py: error: unrecognized arguments: --processors 3" in refused.stderr
