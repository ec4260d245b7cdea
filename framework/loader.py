"""Finding the user's ``App`` from a ``MODULE:ATTRIBUTE`` spec, as uvicorn and gunicorn do."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from framework.app import App
from framework.config import AppConfig
from framework.errors import SplitstateError

__all__ = ["load_app"]


def load_app(spec: str, config_file: Path | None = None) -> App:
    """Import ``MODULE:ATTRIBUTE`` (from the current directory too) and apply ``config_file``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SplitstateError(
            f"{spec!r} is not MODULE:APP. Fix: name the module and the App object, e.g. "
            "examples.wordcount.app:app"
        )
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise SplitstateError(
            f"cannot import module {module_name!r} ({error}). Fix: run from the directory "
            "that holds it, or install it into this environment."
        ) from None
    app = getattr(module, attribute, None)
    if not isinstance(app, App):
        raise SplitstateError(
            f"{module_name}.{attribute} is {type(app).__name__}, not a splitstate App. "
            f"Fix: point at the App object, e.g. {module_name}:app"
        )
    app.spec = spec
    if config_file is not None:
        app.configure(AppConfig.load(config_file))
        app.config_file = config_file
    return app
