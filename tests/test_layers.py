"""The shape of the code: subsystem layers and no import cycles.

Read from the source with ``ast`` (imports under ``if TYPE_CHECKING:`` are left out: they
never run). A module importing ``a.b.c`` also runs the ``__init__`` of ``a.b`` unless it
lives inside ``a.b`` itself; that edge counts too. The root packages' own ``__init__``
(``framework``, ``statestore``, ``rebalance``) is where users import from and is left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("framework", "statestore", "rebalance")

#: ``framework``'s layers, lowest first: a module imports only from its own layer or lower.
FRAMEWORK_LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "framework.errors",
        "framework.clock",
        "framework.gc_tuning",
        "framework.config",
        "framework.config_checks",
        "framework.config_client",
        "framework.config_errors",
        "framework.config_files",
        "framework.config_kafka",
        "framework.config_sections",
        "framework.config_time",
        "framework.redaction",
        "framework.records",
        "framework.decoding",
        "framework.stored_values",
        "framework.output_encoding",
        "framework.time",  # (its __init__ holds what apps declare, so it runs with the app's)
        "framework.tables",
        "framework.joins",
        "framework.order",
        "framework.repartition",
        "framework.app_checks",
        "framework.app_script",
        "framework.app",
    ),
    ("framework.loader", "framework.jvm"),
    ("framework.metrics",),
    ("framework.kafka",),
    ("framework.coordination",),
    ("framework.growth",),
    (
        "framework.processing",
        "framework.routes",
        "framework.producer",
        "framework.input_times",
        "framework.stored_marks",
        "framework.testing",
    ),
    ("framework.bootstrap",),
    ("framework.snapshots",),
    ("framework.runtime",),
    ("framework.ops",),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []  # never runs
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Our modules that importing ``name`` runs directly."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in _runtime_imports(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + is_package]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            if target.split(".")[0] not in PACKAGES or target not in modules:
                continue
            found.add(target)
            parts = target.split(".")
            for cut in range(2, len(parts)):  # packages whose __init__ runs first
                package = ".".join(parts[:cut])
                if not (name == package or name.startswith(package + ".")):
                    found.add(package)
    found.discard(name)
    return found


#: Imports left out of the layers and the cycles: ``App.run`` (``python app.py``) enters the
#: command line, which sits above every layer, from inside the method, when it is called (every
#: module is loaded by then), never when ``framework.app`` is imported.
ENTRY_POINTS = {"framework.app": ("framework.ops", "framework.ops.cli")}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    for name, entered in ENTRY_POINTS.items():
        graph[name] -= set(entered)
    return graph


def test_the_entry_point_imports_the_command_line_only_when_called() -> None:
    """The import ``ENTRY_POINTS`` leaves out is inside a function, not at module level."""
    for name, entered in ENTRY_POINTS.items():
        tree = ast.parse(_modules()[name].read_text())
        top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
        assert not {getattr(node, "module", None) for node in top} & set(entered), name


def _layer(module: str) -> int | None:
    for index, layer in enumerate(FRAMEWORK_LAYERS):
        if any(module == prefix or module.startswith(prefix + ".") for prefix in layer):
            return index
    return None


def test_no_import_cycles() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph[module]):
            if target in PACKAGES:
                continue
            if state.get(target) == 1:
                cycle = [*stack[stack.index(target) :], target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state and module not in PACKAGES:
            visit(module)


def test_rebalance_and_statestore_import_nothing_above_them() -> None:
    for module, targets in _graph().items():
        if module.startswith("rebalance"):
            assert {t for t in targets if not t.startswith("rebalance")} == set(), module
        if module.startswith("statestore"):
            above = {t for t in targets if not t.startswith(("statestore", "rebalance"))}
            assert above == set(), module


def test_the_order_core_is_pure() -> None:
    """``framework.order`` (one order for several inputs) does no I/O: of ours it imports only
    itself and ``rebalance.positions``, never Kafka, the runtime or the state store."""
    allowed = ("framework.order", "rebalance.positions")
    wrong = {
        f"{module} imports {target}"
        for module, targets in _graph().items()
        if module.startswith("framework.order")
        for target in targets
        if not any(target == name or target.startswith(name + ".") for name in allowed)
    }
    assert wrong == set()


#: The most lines a module of ours may have: past it, it holds more than one job.
MAX_MODULE_LINES = 400


def test_no_module_is_over_the_line_limit() -> None:
    long = {
        name: lines
        for name, path in _modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"split these modules by job (at most {MAX_MODULE_LINES} lines each)"


def test_framework_modules_import_only_their_layer_or_lower() -> None:
    wrong = []
    for module, targets in _graph().items():
        if not module.startswith("framework.") or module == "framework":
            continue
        layer = _layer(module)
        assert layer is not None, f"{module} is in no layer of FRAMEWORK_LAYERS"
        for target in targets:
            target_layer = _layer(target) if target.startswith("framework.") else -1
            assert target_layer is not None, f"{target} is in no layer of FRAMEWORK_LAYERS"
            if target_layer > layer:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


#: Where ``confluent_kafka`` may appear: the Kafka port, and the local broker's health checks.
KAFKA_CLIENT_PACKAGES = ("framework.kafka", "framework.ops.broker")


def test_confluent_kafka_is_used_only_behind_the_kafka_port() -> None:
    allowed = KAFKA_CLIENT_PACKAGES
    wrong = sorted(
        name
        for name, path in _modules().items()
        if "confluent_kafka" in path.read_text()
        and not any(name == prefix or name.startswith(prefix + ".") for prefix in allowed)
    )
    assert wrong == [], f"modules using confluent_kafka outside {KAFKA_CLIENT_PACKAGES}: {wrong}"
