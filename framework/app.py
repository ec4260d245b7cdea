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

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from framework.app_checks import check_app
from framework.app_script import script_spec
from framework.config import AppConfig, ConfigError
from framework.joins.declare import declare_interval_join, declare_table_join, refuse_joined_input
from framework.joins.interval import IntervalJoinSpec, JoinFunction, JoinType
from framework.joins.table_join import TableJoinFunction, TableJoinSpec
from framework.records import Output, Record
from framework.repartition import GroupBySpec, KeyFunction, declare_group_by
from framework.tables.checks import refuse_table_processor
from framework.tables.spec import TableSpec, TableUpsert
from framework.time.aggregations import Aggregation
from framework.time.durations import Duration, to_ms
from framework.time.key_clock import TIME_STORE
from framework.time.specs import EventTime, TimerSpec, WindowSpec
from framework.time.views import WindowAdder
from framework.time.window_state import WindowResult
from framework.time.windows import WindowKind
from statestore import StoreSpec
from statestore.codec import RawBytes
from statestore.due_index import DUE_STORE

__all__ = ["ANY_TOPIC", "App", "Handler", "ProcessorFunction", "TimerFunction"]

ProcessorFunction = Callable[[Record[Any], Any], Output | Iterable[Output] | None]
F = TypeVar("F", bound=ProcessorFunction)
J = TypeVar("J", bound=JoinFunction)
T = TypeVar("T", bound=TableJoinFunction)
#: a timer store's function: ``(timer, state) -> outputs``
TimerFunction = Callable[[Any, Any], Output | Iterable[Output] | None]


#: The handler key of a function registered for every input topic without one of its own.
ANY_TOPIC = "*"
#: names of splitstate's own stores start so; an app's names may not
RESERVED_PREFIX = "splitstate."


@dataclass(frozen=True)
class Handler:
    """A processor function registered for one input topic (or ``ANY_TOPIC``)."""

    topic: str
    function: ProcessorFunction
    value_type: type[Any] | None
    stores: tuple[str, ...]
    #: where the records' event time comes from (``None``: the Kafka timestamp)
    event_time: EventTime = None


class App:
    """A stateful processing app: stores, processor functions, and its config."""

    def __init__(
        self, config: AppConfig | None = None, config_file: Path | None = None, **settings: Any
    ) -> None:
        """``config``, or ``config_file`` (YAML or TOML) with the environment, loaded on first
        use; ``settings``: config fields given in code (they take precedence over the file's),
        e.g. ``App(app_id="shop", inputs=["orders"], outputs=["totals"])``."""
        if config is not None and settings:
            raise ConfigError(
                f"App() got a config and settings {sorted(settings)}: give one of them. Fix: "
                "put the settings into the AppConfig, or pass no config"
            )
        self._config = config
        self._settings = settings
        self.config_file = config_file
        #: ``MODULE:ATTRIBUTE`` this app was loaded from (``load_app`` sets it), so child
        #: processes (processors, Spark bootstrap jobs) can import it again.
        self.spec: str | None = None
        self.stores: dict[str, StoreSpec] = {}
        self.handlers: dict[str, Handler] = {}
        #: window stores, timer stores, and stores whose values expire (their default ttl)
        self.windows: dict[str, WindowSpec] = {}
        self.timers: dict[str, TimerSpec] = {}
        self.ttls: dict[str, int | None] = {}
        #: input topics declared tables (``table``), by topic
        self.tables: dict[str, TableSpec] = {}
        #: interval joins and table joins (``interval_join``, ``table_join``), by name
        self.interval_joins: dict[str, IntervalJoinSpec] = {}
        self.table_joins: dict[str, TableJoinSpec] = {}
        #: re-keyings through internal topics (``group_by``), by name
        self.repartitions: dict[str, GroupBySpec] = {}

    @property
    def config(self) -> AppConfig:
        """The config: as given, or loaded from ``config_file`` and the environment on first use."""
        if self._config is None:
            self._config = AppConfig.load(self.config_file, **self._settings)
        return self._config

    def configure(self, config: AppConfig) -> None:
        """Run with ``config`` instead of the default one."""
        self._config = config

    @property
    def app_id(self) -> str:
        """The app's id."""
        return self.config.app_id

    def store(
        self, name: str, value_type: type[Any] | None = None, *, ttl: Duration | bool = False
    ) -> StoreSpec:
        """Declare a named key-value store; ``value_type`` None means any JSON-able value.

        ``ttl``: the key's value expires that long after it was set, by the key's time
        (``True``: only when ``set(value, ttl=...)`` says); functions then get an
        ``ExpiringState``."""
        self._new_name(name, "store")
        spec = StoreSpec(name, value_type)
        self.stores[name] = spec
        if ttl is not False:
            self.ttls[name] = None if ttl is True else to_ms(ttl, f"ttl of store {name!r}")
        return spec

    def windows_store(
        self,
        name: str,
        kind: WindowKind,
        aggregation: Aggregation,
        *,
        emit: Literal["final", "current"] = "final",
        to: str | None = None,
        result: Callable[[WindowResult], Any] | None = None,
        on_late: Callable[..., Any] | None = None,
    ) -> WindowSpec:
        """Declare a window store: functions get its ``KeyWindows`` and ``add`` values to
        the key's windows of ``kind``; each window's ``aggregation`` is emitted to ``to``
        (default: the only output topic) when it closes (``emit="final"``) or at each
        change (``"current"``). See ``WindowSpec``."""
        self._new_name(name, "window store")
        spec = WindowSpec(name, kind, aggregation, emit, to, result, on_late)
        self.windows[name] = spec
        return spec

    def window(
        self,
        topic: str,
        kind: WindowKind,
        aggregation: Aggregation,
        *,
        name: str | None = None,
        value_type: type[Any] | None = None,
        event_time: EventTime = None,
        emit: Literal["final", "current"] = "final",
        to: str | None = None,
        result: Callable[[WindowResult], Any] | None = None,
        on_late: Callable[..., Any] | None = None,
    ) -> Callable[[Callable[[Record[Any]], Any]], Callable[[Record[Any]], Any]]:
        """Window input ``topic`` by key: the decorated function gives the value each record
        adds (``windows_store`` plus a processor that adds it). ``name``: the window
        store's (default: the function's name)."""

        def register(function: Callable[[Record[Any]], Any]) -> Callable[[Record[Any]], Any]:
            store = name or function.__name__
            self.windows_store(
                store, kind, aggregation, emit=emit, to=to, result=result, on_late=on_late
            )
            adder = WindowAdder(store, function)
            self.processor(topic, value_type, stores=[store], event_time=event_time)(adder)
            return function

        return register

    def timer(
        self, name: str, stores: Sequence[str] | None = None
    ) -> Callable[[TimerFunction], TimerFunction]:
        """Declare timer store ``name``, whose timers call the decorated function with the
        ``Timer`` and the key's ``stores`` (as a processor function gets them; default: the
        app's key-value stores). Processor functions that list ``name`` in their stores
        get its ``KeyTimers`` to set and cancel timers."""

        def register(function: TimerFunction) -> TimerFunction:
            self._new_name(name, "timer store")
            self.timers[name] = TimerSpec(
                name, function, tuple(stores) if stores is not None else ()
            )
            return function

        return register

    def table(
        self,
        topic: str,
        value_type: type[Any] | None = None,
        *,
        history: Duration = 0,
        event_time: EventTime = None,
    ) -> TableSpec:
        """Declare input ``topic`` a table: its records upsert the key's value (validated as
        ``value_type``, as a processor's; an invalid one is a dead letter), its tombstones (no
        value, or an empty one) delete it; no processor function runs for them. Functions list
        ``topic`` in their ``stores`` to get the key's ``KeyTable``. ``history``: how long
        before the key's table time older versions are kept for as-of reads (0: only the
        newest). ``event_time``: as for ``processor`` (a tombstone has none of its own with a
        field or a function: it deletes as of the key's table time; see ``TableSpec``).
        An app with a table and another input needs ``time.input_order: canonical``."""
        if topic in self.handlers:
            raise ValueError(
                f"input {topic!r} already has a processor function, so it cannot be a table "
                "too: a table's records only upsert it. Fix: remove "
                f"@app.processor({topic!r}), and read the table with stores=[{topic!r}] in "
                "another input's function"
            )
        self._new_name(topic, "table")
        kept = to_ms(history, f"history of table {topic!r}", positive=False)
        spec = TableSpec(topic, value_type, kept, event_time)
        StoreSpec(spec.store, RawBytes)  # (a name a store may have: ValueError otherwise)
        self.tables[topic] = spec
        self.handlers[topic] = Handler(topic, TableUpsert(spec), value_type, (), event_time)
        return spec

    def interval_join(
        self,
        left: str,
        right: str,
        *,
        before: Duration,
        after: Duration = 0,
        how: JoinType = "inner",
        grace: Duration = 0,
        name: str | None = None,
        left_type: type[Any] | None = None,
        right_type: type[Any] | None = None,
        left_time: EventTime = None,
        right_time: EventTime = None,
    ) -> Callable[[J], J]:
        """Join inputs ``left`` and ``right`` by key within an interval: the decorated
        ``function(left_record, right_record)`` is called once for each left record at ``t``
        and right record at ``s`` (neither late) with ``t - before <= s <= t + after``, when
        the second is applied (in the canonical order). ``how="left"`` (``"outer"``): a left
        (or right) record that matched nothing is passed with ``None`` for the other once
        the key's time (records or ticks) is past ``t + after + grace`` (a right one's: ``s +
        before + grace``). A record more than ``grace`` behind the key's time is late (a
        dead letter). ``left_type``/``right_type`` and ``left_time``/``right_time``: each
        side's ``value_type`` and ``event_time``, as for ``processor``. ``name``: the join's
        (default: the function's). Needs ``time.input_order: canonical``; see
        docs/concepts/joins.md."""
        return declare_interval_join(
            self,
            left,
            right,
            before,
            after,
            how,
            grace,
            name,
            (left_type, right_type),
            (left_time, right_time),
        )

    def table_join(
        self, left: str, right: str, *, how: JoinType = "inner", name: str | None = None
    ) -> Callable[[T], T]:
        """Join tables ``left`` and ``right`` (both ``table``) by key: the decorated
        ``function(record, left_value, right_value)`` is called with the table record that
        changed one of them and both newest values (``None``: none), ``inner``: when both
        have a value after (or before) the change; ``left``: on the left's changes and the
        right's while the left has one; ``outer``: on every change. See
        docs/concepts/joins.md."""
        return declare_table_join(self, left, right, how, name)

    def group_by(
        self, source: str, key: KeyFunction, *, name: str, value_type: type[Any] | None = None,
        event_time: EventTime = None,
    ) -> GroupBySpec:  # fmt: skip
        """Re-key input ``source`` by ``key(record)`` into internal input topic
        ``<app_id>-repartition-<name>``, read by the next stage with ``event_time=
        spec.event_time``; ``value_type``, ``event_time``: the source's, as for ``processor``
        (see ``framework.repartition``)."""
        return declare_group_by(self, source, key, name, value_type, event_time)

    @property
    def uses_time(self) -> bool:
        """Whether the app keeps time per key (a window or timer store, or a ttl)."""
        return bool(self.windows or self.timers or self.ttls)

    def _new_name(self, name: str, what: str) -> None:
        if (
            name in self.stores
            or name in self.windows
            or name in self.timers
            or name in self.tables
        ):
            raise ValueError(f"{what} {name!r}: the name is declared twice")
        if name.startswith(RESERVED_PREFIX):
            raise ValueError(
                f"{what} {name!r}: names starting {RESERVED_PREFIX!r} are splitstate's own. "
                "Fix: choose another name."
            )

    def processor(
        self,
        topic: str | None = None,
        value_type: type[Any] | None = None,
        stores: Sequence[str] | None = None,
        *,
        event_time: EventTime = None,
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
            refuse_table_processor(self, name)
            if name in self.handlers:
                refuse_joined_input(self, name, "@app.processor")
                what = "every topic" if topic is None else f"topic {topic!r}"
                raise ValueError(f"a processor for {what} is already registered")
            self.handlers[name] = Handler(
                name,
                function,
                value_type,
                tuple(stores) if stores is not None else (),
                event_time,
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
        """Every store of the app's state: the declared ones, splitstate's own time stores
        when it keeps time (``framework.time.key_clock``), its tables' versions and its
        interval joins' buffers."""
        own = [StoreSpec(TIME_STORE, RawBytes), StoreSpec(DUE_STORE, RawBytes)]
        own = own if self.uses_time else []
        tables = [StoreSpec(spec.store, RawBytes) for spec in self.tables.values()]
        joins = [StoreSpec(spec.store, RawBytes) for spec in self.interval_joins.values()]
        return [*self.stores.values(), *own, *tables, *joins]

    def run(self, argv: Sequence[str] | None = None) -> None:
        """Run the app from its own script, as ``splitstate run FILE.py:APP`` would:
        ``if __name__ == "__main__": app.run()`` at the end of ``app.py`` makes
        ``python app.py --processor-id J`` (or ``SPLITSTATE_PROCESSOR_ID``) run processor
        ``J``, ``python app.py --all`` every processor under a local supervisor, with
        ``run``'s options (``--config FILE``, ``--log-format``; ``argv``, default the
        script's arguments); ``python -m package.app`` works too. Exits with the command's
        status (``SystemExit``).

        Every process of the app (this one, the supervisor's processors, Spark's workers)
        imports the file by its name (``app``; ``package.app`` with ``-m``), so the app must be
        whole at module level: what the ``__main__`` block does besides ``run()`` happens in
        this first process only."""
        from framework.ops.cli import main  # noqa: PLC0415 - the command line sits above the app

        arguments = sys.argv[1:] if argv is None else argv
        spec = self._script_spec()
        module, _, _ = spec.rpartition(":")
        script = f"python {Path(module).name}" if module.endswith(".py") else f"python -m {module}"
        raise SystemExit(main(["run", spec, *arguments], script=script))

    def _script_spec(self) -> str:
        """``PATH.py:NAME`` of this app in the script Python runs (``script_spec``)."""
        return script_spec(self)

    def check(self) -> None:
        """Raise ``ConfigError`` when the config and the registered functions disagree."""
        check_app(self)
