"""Finding the user's ``App`` from a ``MODULE:ATTRIBUTE`` spec, as uvicorn and gunicorn do, or
from a file's ``PATH.py:ATTRIBUTE`` (from any directory)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

from framework.app import App
from framework.config import AppConfig
from framework.errors import SplitstateError

__all__ = ["load_app"]


def load_app(spec: str, config_file: Path | None = None) -> App:
    """Import ``MODULE:ATTRIBUTE`` (from the current directory too) or the file
    ``PATH.py:ATTRIBUTE`` (its directory first on the import path, so its own imports work; the
    script Python runs, ``python app.py``, is not imported again) and apply ``config_file``."""
    module_name, _, attribute = spec.rpartition(":")
    if not module_name or not attribute:
        raise SplitstateError(
            f"{spec!r} is not MODULE:APP or FILE.py:APP. Fix: name the module (or the file) "
            "and the App object, e.g. examples.wordcount.app:app or examples/wordcount/app.py:app"
        )
    if module_name.endswith(".py"):
        path = Path(module_name).resolve()
        module = _import_file(path)
        module_name, spec = path.name, f"{path}:{attribute}"
    else:
        if str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            raise _not_found(module_name, error) from None
    if not hasattr(module, attribute):
        raise SplitstateError(
            f"module {module_name!r} has no attribute {attribute!r}. Fix: "
            f"{_apps_in(module, module_name)}"
        )
    app = getattr(module, attribute)
    if not isinstance(app, App):
        raise SplitstateError(
            f"{module_name}.{attribute} is {type(app).__name__}, not a splitstate App. "
            f"Fix: {_apps_in(module, module_name)}"
        )
    app.spec = spec
    if config_file is not None:
        app.configure(AppConfig.load(config_file))
        app.config_file = config_file
    return app


def _import_file(path: Path) -> ModuleType:
    """The module of the Python file ``path``, imported (once) under its file name's stem, as
    every process of the app imports it (the supervisor's processors, Spark's workers, which
    find it by that name): also when it is the script Python runs, whose ``__main__`` is
    another module. A stem that already names another module is refused: importing the file
    under it would change what that name means to every later import."""
    if not path.is_file():
        raise SplitstateError(
            f"cannot find the file {str(path)!r}. Fix: give the path of the Python file that "
            "defines the App (relative to this directory, or absolute), e.g. app.py:app"
        )
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None:
        if _origin(getattr(loaded, "__file__", None)) == path:
            return loaded
        raise _clash(path, name, getattr(loaded, "__file__", None) or "built in")
    try:
        elsewhere = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        elsewhere = None
    if elsewhere is not None and _origin(elsewhere.origin) != path:
        raise _clash(path, name, elsewhere.origin or "built in")
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:
        raise SplitstateError(f"{str(path)!r} is not a Python file Python can import")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
    except ModuleNotFoundError as error:
        del sys.modules[name]
        raise _not_found(name, error) from None
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _origin(file: str | None) -> Path | None:
    return None if file is None else Path(file).resolve()


def _clash(path: Path, name: str, other: str) -> SplitstateError:
    return SplitstateError(
        f"cannot load {str(path)!r} as module {name!r}: that name is already another module "
        f"here ({other}), and each of the app's processes imports the file by that name. "
        "Fix: rename the file (e.g. shop_app.py), or run from its directory as MODULE:APP"
    )


def _not_found(module_name: str, error: ModuleNotFoundError) -> SplitstateError:
    """The error for a failed import: the module itself (or its package) not found, or an
    import inside it that failed (named, with the line that made it)."""
    missing = error.name or ""
    if module_name == missing or module_name.startswith(f"{missing}."):
        return SplitstateError(
            f"cannot find module {module_name!r} ({error}; looked in {Path.cwd()} and the "
            "environment's packages). Fix: run from the directory that holds it, or install "
            "it into this environment."
        )
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "importlib" not in f.filename]
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return SplitstateError(
        f"module {module_name!r} was found, but importing it failed: it imports {missing!r}, "
        f"which Python cannot find{where}. Fix: install the package that provides "
        f"{missing!r} into the environment `splitstate` runs from ({sys.prefix})."
    )


def _apps_in(module: ModuleType, module_name: str) -> str:
    """How to point at the module's ``App`` objects (or say there is none)."""
    apps = [name for name, value in vars(module).items() if isinstance(value, App)]
    if not apps:
        return f"module {module_name!r} defines no App; create one (app = App(...)) there."
    return "point at its App object: " + " or ".join(f"{module_name}:{name}" for name in apps)
