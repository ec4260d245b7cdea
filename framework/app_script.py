"""Which app the script Python runs defines (``App.run``'s ``PATH.py:NAME``)."""

from __future__ import annotations

import sys
from pathlib import Path

from framework.errors import SplitstateError

__all__ = ["script_spec"]


def script_spec(app: object) -> str:
    """``PATH.py:NAME`` (``MODULE:NAME`` under ``python -m``) of ``app`` in the script Python
    runs (``SplitstateError``: it is none of the script's names)."""
    script = sys.modules.get("__main__")
    path = getattr(script, "__file__", None)
    names = [name for name, value in vars(script).items() if value is app] if script else []
    if path is None or not names:
        raise SplitstateError(
            "app.run() runs the App that the script Python runs defines (python app.py, "
            "with `if __name__ == '__main__': app.run()` at its end); this App is none of "
            "its names. Fix: run it with `splitstate run MODULE:APP` (or FILE.py:APP)"
        )
    module = getattr(getattr(script, "__spec__", None), "name", None)
    if module:  # python -m package.app: imported by its module name, relative imports work
        return f"{module}:{names[0]}"
    return f"{Path(path).resolve()}:{names[0]}"
