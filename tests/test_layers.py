"""The floors of the package hold: every folder is one layer, no module imports a floor above
its own, no import circle, faces apart.

Read from the source with `ast`, every import counts: function-local ones (they are how a
cycle hides) and those under `if TYPE_CHECKING:` too (a circle a type checker must untie is
still a circle for a reader).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from rq.utils import import_attribute

import omniroute.jobs as jobs_package
from omniroute.jobs.periodic.schedule import PERIODIC_JOBS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("omniroute",)

# The floors, by folder (docs/architecture.md draws them). A module may import its own floor
# and those below it; the longest matching prefix decides.
LAYERS = {
    "omniroute": 0,  # the package's own __init__: its docstring, nothing else
    "omniroute.core": 0,  # shared parts: config, db, providers, net, errors, fields, logs...
    "omniroute.memory": 1,  # the core: store, search, life cycle, extraction, backends
    "omniroute.services": 2,  # wiring: the long-lived objects,
    "omniroute.jobs": 2,  # background work and its schedule,
    "omniroute.web": 2,  # and the HTTP edge every face shares
    "omniroute.proxy": 3,  # faces
    "omniroute.api": 3,
    "omniroute.studio": 3,
    "omniroute.mcp": 3,
    "omniroute.cli": 3,
    "omniroute.factory": 4,  # entry points
    "omniroute.serve": 4,
    "omniroute.mcp.__main__": 4,
    "app": 4,
}
LAYER_NAMES = ("shared", "core", "wiring", "face", "entry")
FACES = ("omniroute.proxy", "omniroute.api", "omniroute.studio", "omniroute.mcp", "omniroute.cli")
# How many modules and folders a floor plan may show at a glance.
MOST_AT_TOP = {"omniroute": 12, "omniroute/memory": 16}


def module_files() -> dict[str, Path]:
    modules = {"app": ROOT / "app.py"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


MODULES = module_files()


def _walk(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        yield child
        yield from _walk(child)


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    is_package = MODULES[module].name == "__init__.py"
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _with_parents(name: str) -> list[str]:
    """A module and the packages Python imports on the way to it."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts) + 1)]


def imports_of(module: str) -> set[str]:
    """The project's modules that `module` imports, anywhere in its body."""
    tree = ast.parse(MODULES[module].read_text())
    found: set[str] = set()
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            names = [target]
            names += [f"{target}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            found.update(part for part in _with_parents(name) if part in MODULES)
    # A module's own packages are loaded before it, whatever it imports: no edge to them.
    return found - set(_with_parents(module))


GRAPH = {module: imports_of(module) for module in MODULES}


def layer_of(module: str) -> int:
    prefixes = [p for p in LAYERS if module == p or module.startswith(f"{p}.")]
    return LAYERS[max(prefixes, key=len)]


def face_of(module: str) -> str | None:
    return next((f for f in FACES if module == f or module.startswith(f"{f}.")), None)


def test_the_import_graph_sees_the_whole_package():
    assert {
        "omniroute.memory.search.retrieval",
        "omniroute.core.providers.client",
        "omniroute.jobs.tasks",
    } <= set(GRAPH)
    assert "omniroute.memory.store" in GRAPH["omniroute.memory.search.retrieval"]
    assert "omniroute.jobs" in GRAPH["omniroute.services"]
    assert "omniroute.memory.qdrant.tier" in GRAPH["omniroute.memory.search.retrieval"], (
        "an import under TYPE_CHECKING counts"
    )


def test_every_module_sits_in_a_floor():
    floors = [p for p in LAYERS if p != "omniroute"]
    assert [m for m in MODULES if m != "omniroute" and not any(
        m == p or m.startswith(f"{p}.") for p in floors)] == []  # fmt: skip


@pytest.mark.parametrize(("folder", "most"), MOST_AT_TOP.items())
def test_a_folder_shows_its_plan_at_a_glance(folder, most):
    shown = [
        p.name
        for p in (ROOT / folder).iterdir()
        if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists())
    ]
    assert len(shown) <= most, sorted(shown)


def test_there_is_no_import_cycle():
    # Tarjan's strongly connected components: any component of two or more is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in GRAPH[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == []


def test_no_module_imports_a_layer_above_its_own():
    upwards = [
        f"{module} ({LAYER_NAMES[layer_of(module)]}) imports {target} "
        f"({LAYER_NAMES[layer_of(target)]})"
        for module, targets in GRAPH.items()
        for target in targets
        if layer_of(target) > layer_of(module)
    ]
    assert upwards == []


def test_the_faces_never_import_each_other():
    crossings = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if face_of(module) and face_of(target) and face_of(module) != face_of(target)
    ]
    assert crossings == []


@pytest.mark.parametrize("layer", [0, 1])
def test_the_core_and_shared_parts_know_no_face_and_no_queue(layer):
    below = [m for m in GRAPH if layer_of(m) == layer]
    assert below
    assert [m for m in below if any(layer_of(t) >= 2 for t in GRAPH[m])] == []


@pytest.mark.slow
def test_importing_the_memory_core_loads_no_flask_and_no_face():
    core = sorted(m for m in MODULES if m.startswith("omniroute.memory"))
    script = (
        "import importlib, sys\n"
        f"for name in {core!r}: importlib.import_module(name)\n"
        "loaded = [m for m in sys.modules if m == 'flask' or m.startswith(('flask.', 'rq',"
        " 'omniroute.proxy', 'omniroute.api', 'omniroute.studio', 'omniroute.mcp',"
        " 'omniroute.jobs', 'omniroute.web'))]\n"
        "print(loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_every_job_named_by_its_dotted_path_exists():
    """Jobs reach RQ by dotted path (RQ stores the path, and the queue's module cannot import
    the job functions, which import it): each path must name a function, or a job fails
    only when a worker takes it."""
    paths = [
        value for name, value in vars(jobs_package).items() if name.isupper() and "." in str(value)
    ]
    paths += [job.task for job in PERIODIC_JOBS]
    assert len(paths) >= 7
    assert [path for path in paths if not callable(import_attribute(path))] == []
