"""``App``: an app's processor functions and stores, plus the config it runs with.

::

    app = App(config_file=Path(__file__).with_name("config.yaml"))
    app.store("counts")

    @app.processor()  # every input topic; or @app.processor("words") for one
    def count(record: Record[bytes], state: KeyState[int]) -> Output:
        total = (state.get() or 0) + 1
        state.set(total)
        return Output({"word": record.key_text, "count": total})  # to the only output topic
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from framework.config import AppConfig, ConfigError
from framework.records import Output, Record
from statestore import StoreSpec

__all__ = ["ANY_TOPIC", "App", "Handler", "ProcessorFunction"]

ProcessorFunction = Callable[[Record[Any], Any], Output | Iterable[Output] | None]
F = TypeVar("F", bound=ProcessorFunction)


#: The handler key of a function registered for every input topic without one of its own.
ANY_TOPIC = "*"


@dataclass(frozen=True)
class Handler:
    """A processor function registered for one input topic (or ``ANY_TOPIC``)."""

    topic: str
    function: ProcessorFunction
    value_type: type[Any] | None
    stores: tuple[str, ...]


class App:
    """A stateful processing app: stores, processor functions, and its config."""

    def __init__(self, config: AppConfig | None = None, config_file: Path | None = None) -> None:
        self._config = config
        self.config_file = config_file
        #: ``MODULE:ATTRIBUTE`` this app was loaded from (``load_app`` sets it), so child
        #: processes (processors, Spark bootstrap jobs) can import it again.
        self.spec: str | None = None
        self.stores: dict[str, StoreSpec] = {}
        self.handlers: dict[str, Handler] = {}

    @property
    def config(self) -> AppConfig:
        """The config: as given, or loaded from ``config_file`` and the environment on first use."""
        if self._config is None:
            self._config = AppConfig.load(self.config_file)
        return self._config

    def configure(self, config: AppConfig) -> None:
        """Run with ``config`` instead of the default one."""
        self._config = config

    @property
    def app_id(self) -> str:
        """The app's id."""
        return self.config.app_id

    def store(self, name: str, value_type: type[Any] | None = None) -> StoreSpec:
        """Declare a named key-value store; ``value_type`` None means any JSON-able value."""
        if name in self.stores:
            raise ValueError(f"store {name!r} is declared twice")
        spec = StoreSpec(name, value_type)
        self.stores[name] = spec
        return spec

    def processor(
        self,
        topic: str | None = None,
        value_type: type[Any] | None = None,
        stores: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated function for records of input ``topic`` (default: every
        input topic that has no function of its own).

        ``value_type``: ``None`` or ``bytes`` passes raw bytes, ``str`` decodes UTF-8, any
        other type (a pydantic model, ``dict``, ...) parses JSON and validates. ``stores``:
        the stores the function sees (default: all declared); with one store the function
        gets its ``KeyState``, with several a dict of them by name.
        """

        name = ANY_TOPIC if topic is None else topic

        def register(function: F) -> F:
            if name in self.handlers:
                what = "every topic" if topic is None else f"topic {topic!r}"
                raise ValueError(f"a processor for {what} is already registered")
            self.handlers[name] = Handler(
                name, function, value_type, tuple(stores) if stores is not None else ()
            )
            return function

        return register

    def handler(self, topic: str) -> Handler:
        """The handler of input ``topic``."""
        try:
            return self.handlers.get(topic) or self.handlers[ANY_TOPIC]
        except KeyError:
            raise ConfigError(
                f"app {self.app_id!r} has no processor function for input topic {topic!r}. "
                f"Fix: decorate one with @app.processor({topic!r})."
            ) from None

    def store_specs(self) -> list[StoreSpec]:
        """Every declared store."""
        return list(self.stores.values())

    def check(self) -> None:
        """Raise ``ConfigError`` when the config and the registered functions disagree."""
        inputs = {t.topic for t in self.config.inputs}
        missing = [] if ANY_TOPIC in self.handlers else sorted(inputs - set(self.handlers))
        if missing:
            raise ConfigError(
                f"input topics without a processor function: {missing}. Fix: register one "
                "with @app.processor(TOPIC) or remove the topic from `inputs`."
            )
        extra = sorted(set(self.handlers) - inputs - {ANY_TOPIC})
        if extra:
            raise ConfigError(
                f"processor functions for topics that are not inputs: {extra}. Fix: add them "
                "under `inputs` in the config."
            )
        for handler in self.handlers.values():
            for name in handler.stores:
                if name not in self.stores:
                    raise ConfigError(
                        f"processor for {handler.topic!r} uses store {name!r}, which is not "
                        f"declared. Fix: app.store({name!r})."
                    )
