"""A new app's files (``splitstate new NAME``): an app that counts each key's records, its
config, a test that passes with ``TestDriver`` and a README saying how to run it."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from framework.errors import SplitstateError

__all__ = ["new_app"]

#: an app name: a topic-name-safe word that also names a Python package (``[a-z][a-z0-9_]*``)
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")

_APP = '''"""{name}: counts the records of each key.

Input topic ``{name}-input``: any key, any value. Output topic ``{name}-counts``: the key,
with ``{{"key": ..., "count": N}}``, N the key's running count.

Run: python app.py --all (every processor), or python app.py --processor-id 0
"""

from __future__ import annotations

from pathlib import Path

from framework import App, KeyState, Output, Record

app = App(config_file=Path(__file__).with_name("config.yaml"))
app.store("counts")


@app.processor()
def count(record: Record[bytes | None], state: KeyState[int]) -> Output:
    """Add one to the key's count and write the new count to the output topic."""
    total = (state.get() or 0) + 1
    state.set(total)
    return Output({{"key": record.key_text, "count": total}})


if __name__ == "__main__":
    app.run()
'''

_CONFIG = """\
# {name}'s config. Every field can be overridden with SPLITSTATE_<FIELD>, nested with __
# (e.g. SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS=127.0.0.1:9092).
app_id: "{name}"
kafka:
  bootstrap_servers: 127.0.0.1:9092
inputs:
  - topic: {name}-input
    partitions: 4
outputs:
  - topic: {name}-counts
    partitions: 4
# processors splitting the keys when the app first runs (B): partition counts are B x 2^k
initial_processors: 1
# how many run now: change it (splitstate scale) to scale without moving state
processors: 1
"""

_TEST = '''"""{name}'s processor function, tested without Kafka (pytest test_app.py)."""

from __future__ import annotations

from framework import TestDriver

from .app import app  # (the directory is a package: two apps' tests run in one pytest)


def test_each_key_is_counted() -> None:
    driver = TestDriver(app)
    driver.send("{name}-input", b"apple")
    driver.send("{name}-input", b"pear")
    driver.send("{name}-input", b"apple")
    assert driver.output_values() == [
        {{"key": "apple", "count": 1}},
        {{"key": "pear", "count": 1}},
        {{"key": "apple", "count": 2}},
    ]
    assert driver.state("counts", b"apple") == 2
'''

_README = """# {name}

A splitstate app: `app.py` (the processor function), `config.yaml` (topics, processors),
`test_app.py` (its test, without Kafka).

```sh
pytest test_app.py                                  # the function, without Kafka
splitstate broker start                             # a local broker, if you have none
export SPLITSTATE_KAFKA__BOOTSTRAP_SERVERS=127.0.0.1:PORT
splitstate topics create app.py:app                 # inputs, outputs, dead letters, control log
python app.py --all                                 # every processor (Ctrl-C stops them)
splitstate tail app.py:app                          # its outputs as they are written
splitstate scale app.py:app --processors 2          # a second processor, no state moved
```
"""

_PACKAGE = '''"""{name}: a splitstate app (a package, so that pytest tells it from other apps)."""
'''

_FILES = {
    "__init__.py": _PACKAGE,
    "app.py": _APP,
    "config.yaml": _CONFIG,
    "test_app.py": _TEST,
    "README.md": _README,
}


def new_app(name: str, parent: Path) -> Path:
    """Write app ``name``'s files into the new directory ``parent / name``; returns it."""
    if not _NAME.fullmatch(name):
        raise SplitstateError(
            f"{name!r} is not an app name. Fix: a lowercase letter, then up to 63 lowercase "
            "letters, digits or '_' (it names the app's directory, a Python package, and its "
            "app_id and topics)"
        )
    found = importlib.util.find_spec(name)  # (a directory in the path is no module of note)
    if name in sys.stdlib_module_names or (found is not None and found.origin is not None):
        raise SplitstateError(
            f"{name!r} names a module Python already has: the app's directory is a package "
            "of that name, and its test would import the other one. Fix: pick another name"
        )
    directory = parent / name
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise SplitstateError(
            f"{str(directory)!r} exists and is not an empty directory: nothing was written. "
            "Fix: pick another name or --directory, or remove it"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for file, text in _FILES.items():
            (directory / file).write_text(text.format(name=name))
    except OSError as error:
        raise SplitstateError(
            f"cannot write the app into {str(directory)!r}: {error}. Fix: pick a --directory "
            "you can write to"
        ) from None
    return directory
