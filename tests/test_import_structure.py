"""Import structure of the library: the package root holds only binaries and faces; the layers
below import only downwards; no import cycle anywhere in ``countermem_jax/`` and ``evaluators/``;
``countermem_jax/backbones`` talks to models only (never imports prompting, domains, memory,
retrieval, selector or evaluators); the library never imports the test doubles of
``countermem_jax/testing`` (only tests, ``benchmarks/`` and ``launch/`` may); a SQL task reaches
``evaluators/sql`` through one door, ``countermem_jax/domains/sql.py``; ``evaluators/`` never
imports ``countermem_jax``.

The graph is built from the source with ``ast`` (every ``import``/``from ... import`` statement,
function-level ones included, relative ones resolved), so it sees imports that only run on some
paths too. ``from a import b`` is an edge to the module ``a.b`` when b is a submodule, else to
``a``. Cycles are looked for twice: between modules, and between packages (a module counts as its
package under the root, e.g. ``countermem_jax.phases``, or under one of the three layer packages,
e.g. ``countermem_jax.method.memory``)."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("countermem_jax", "evaluators")
UPWARD_FROM_BACKBONES = ("countermem_jax.method.prompting", "countermem_jax.domains",
                         "countermem_jax.method.memory", "countermem_jax.method.retrieval",
                         "countermem_jax.method.selector", "evaluators")
TEST_DOUBLES = "countermem_jax.testing"
MAY_USE_TEST_DOUBLES = ("countermem_jax.testing",)
SQL_DOOR = "countermem_jax.domains.sql"

# The layers, bottom to top: a module imports from its own layer or lower ones only. Each entry
# names the packages (or root modules) of the layer under ``countermem_jax``.
LAYERS = (
    ("runtime",),                                      # generic machinery, knows no method
    ("backbones", "testing"),                          # the models and their test doubles
    ("method",),                                       # agents, Modules I-III
    ("domains",),                                      # benchmarks and their world models
    ("protocol",),                                     # splits, metrics, provenance, defaults
    ("baselines",),                                    # the compared memories
    ("phases",),                                       # Algorithm 1's three phases
    ("experiment", "cli"),                             # faces of the library
    # data: the `python -m countermem_jax.data` command; its calibration reads protocol/pools.py
    ("studies", "sweep", "reporting", "data"),        # drivers of many runs
    ("build_memory", "train_selector", "evaluate", "inspect_store", "report", "study",
     "study_cost", "preflight", "reverify_store"),     # binaries
)
LAYER_PACKAGES = ("countermem_jax.method", "countermem_jax.runtime", "countermem_jax.protocol")
BINARIES = LAYERS[-1]
FACES = ("__init__",) + LAYERS[-3]


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imported_names(path: pathlib.Path, module: str) -> set[str]:
    """Absolute dotted names this file imports (``from a import b`` yields ``a`` and ``a.b``)."""
    is_package = path.name == "__init__.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[:len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module
            # ``from a import b``: the module ``a.b`` when b is a submodule, else ``a`` itself
            # (resolved against the known modules in ``_graph``).
            names.update(f"{stem}.{alias.name}" for alias in node.names)
    return names


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        targets = set()
        for name in _imported_names(path, module):
            # The longest known module the name is, or is inside of (``a.b.func`` -> ``a.b``).
            parts = name.split(".")
            for end in range(len(parts), 0, -1):
                candidate = ".".join(parts[:end])
                if candidate in modules:
                    if candidate != module:
                        targets.add(candidate)
                    break
        graph[module] = targets
    return graph


def _package_of(module: str) -> str:
    """``countermem_jax.phases.build`` -> ``countermem_jax.phases``; inside the layer packages one
    level deeper (``countermem_jax.method.memory.store`` -> ``countermem_jax.method.memory``)."""
    parts = module.split(".")
    depth = 3 if len(parts) > 2 and ".".join(parts[:2]) in LAYER_PACKAGES else 2
    return ".".join(parts[:depth])


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        mine = _package_of(module)
        packages.setdefault(mine, set()).update(
            _package_of(t) for t in targets if _package_of(t) != mine)
    return packages


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [m0, m1, ..., m0], or None (iterative depth-first search)."""
    state = {}  # 1 = on the current path, 2 = finished
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_the_walker_resolves_imports_and_finds_cycles(tmp_path):
    """Guards the walker itself (relative imports, ``from pkg import submodule``, cycles)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text("import json\ndef f():\n    from .b import g\n")
    assert _imported_names(pkg / "__init__.py", "pkg") == {"pkg.a"}
    assert _imported_names(pkg / "a.py", "pkg.a") == {"json", "pkg.b.g"}
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert _package_graph({"x.m.p": {"x.r.q"}, "x.r.q": {"x.m.o"}, "x.m.o": set()}) == {
        "x.m": {"x.r"}, "x.r": {"x.m"}}


def test_the_graph_sees_real_imports():
    graph = _graph()
    assert len(graph) > 50
    assert "countermem_jax.method.selector.dqn" in graph["countermem_jax.method.selector.training"]
    assert "countermem_jax.method.text_embedding" in graph["countermem_jax.method.retrieval.retrieve"]
    assert "evaluators.base" in graph["evaluators.sql.checker"]


def test_no_import_cycle():
    graph = _graph()
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle between modules: " + " -> ".join(cycle)
    cycle = _find_cycle(_package_graph(graph))
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle)


def test_backbones_import_nothing_above_them():
    upward = _backbone_upward_imports(_graph())
    assert not upward, f"backbones import upward: {upward}"


def test_evaluators_never_import_countermem_jax():
    modules = _modules()
    upward = sorted((m, n) for m, p in modules.items() if m.startswith("evaluators")
                    for n in _imported_names(p, m) if n.split(".")[0] == "countermem_jax")
    assert not upward, f"evaluators import countermem_jax: {upward}"


def _inside(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _backbone_upward_imports(graph) -> list[tuple[str, str]]:
    """(module, target) where a backbone module imports prompting, domains or anything above."""
    return sorted((m, t) for m, targets in graph.items()
                  if _inside(m, ("countermem_jax.backbones",)) for t in targets
                  if _inside(t, UPWARD_FROM_BACKBONES))


def _test_double_users(graph) -> list[tuple[str, str]]:
    """(module, target) where library code outside testing/ imports a test double."""
    return sorted((m, t) for m, targets in graph.items() if not _inside(m, MAY_USE_TEST_DOUBLES)
                  for t in targets if _inside(t, (TEST_DOUBLES,)))


def _sql_doors(graph) -> list[str]:
    """Library modules that import anything of ``evaluators.sql``."""
    return sorted(m for m, targets in graph.items()
                  if _inside(m, ("countermem_jax",))
                  and any(_inside(t, ("evaluators.sql",)) for t in targets))


def test_library_never_imports_the_test_doubles():
    graph = _graph()
    assert TEST_DOUBLES + ".scripted_backbone" in graph   # the walker sees the package
    used = _test_double_users(graph)
    assert not used, f"library code imports test doubles: {used}"


def test_sql_tasks_reach_the_sql_evaluator_through_one_door():
    """Loaders, checker, action extraction and the schema for the rule edits: all through
    domains/sql (the speed benchmarks in ``benchmarks/``, outside the library, time the evaluator
    directly, on purpose)."""
    doors = _sql_doors(_graph())
    assert doors == [SQL_DOOR], f"modules reaching evaluators/sql: {doors}"


def test_the_layering_checks_catch_violations():
    """The checks above on a made-up graph that breaks each rule once."""
    graph = {"countermem_jax.backbones.x": {"countermem_jax.method.prompting.prompts", "json"},
             "countermem_jax.method.agents": {"countermem_jax.testing.scripted_backbone"},
             "countermem_jax.operators": {"evaluators.sql.loaders"},
             SQL_DOOR: {"evaluators.sql"}}
    assert _backbone_upward_imports(graph) == [("countermem_jax.backbones.x",
                                                "countermem_jax.method.prompting.prompts")]
    assert _test_double_users(graph) == [("countermem_jax.method.agents",
                                          "countermem_jax.testing.scripted_backbone")]
    assert _sql_doors(graph) == [SQL_DOOR, "countermem_jax.operators"]


def _layer_of(module: str) -> int | None:
    """Index in ``LAYERS`` of a ``countermem_jax`` module (None for the root package itself and
    for modules outside ``countermem_jax``)."""
    parts = module.split(".")
    if parts[0] != "countermem_jax" or len(parts) < 2:
        return None
    for rank, names in enumerate(LAYERS):
        if parts[1] in names:
            return rank
    raise AssertionError(f"{module} belongs to no layer: add its package to LAYERS")


def _upward_imports(graph) -> list[tuple[str, str]]:
    """(module, target) where a module imports from a layer above its own."""
    return sorted((m, t) for m, targets in graph.items() for t in targets
                  if _layer_of(m) is not None and _layer_of(t) is not None
                  and _layer_of(t) > _layer_of(m))


def _root_strays(names) -> list[str]:
    """Files and packages at the root of ``countermem_jax/`` that are no binary, face or layer."""
    packages = {n for layer in LAYERS if layer not in (BINARIES, LAYERS[-3]) for n in layer}
    allowed = set(BINARIES) | set(FACES) | packages
    return sorted(n for n in names if n not in allowed)


def _root_entries() -> list[str]:
    root = ROOT / "countermem_jax"
    return ([p.stem for p in root.glob("*.py")]
            + [p.name for p in root.iterdir() if p.is_dir() and any(p.rglob("*.py"))])


def test_package_root_holds_only_binaries_and_faces():
    strays = _root_strays(_root_entries())
    assert not strays, (f"modules at the root of countermem_jax/ that are no binary or face: "
                        f"{strays}; move them into method/, runtime/, protocol/ or their package")


def test_every_module_imports_only_its_layer_or_below():
    upward = _upward_imports(_graph())
    assert not upward, f"upward imports (module, target): {upward}"


def test_the_three_layer_packages_hold_what_they_say():
    modules = _modules()
    for name in ("agents", "counterfactual", "memory_use", "memory.store", "retrieval.retrieve",
                 "selector.dqn", "prompting.prompts"):
        assert f"countermem_jax.method.{name}" in modules
    for name in ("inflight", "runlog"):
        assert f"countermem_jax.runtime.{name}" in modules
    for name in ("splits", "metrics", "intervals", "provenance"):
        assert f"countermem_jax.protocol.{name}" in modules


def test_the_layer_and_root_checks_catch_violations():
    """A runtime module importing the method, the method importing the protocol, and a library
    module at the root are each caught; a binary importing anything is not."""
    graph = {"countermem_jax.runtime.runlog": {"countermem_jax.method.memory.store"},
             "countermem_jax.method.agents": {"countermem_jax.protocol.metrics",
                                              "countermem_jax.runtime.inflight"},
             "countermem_jax.evaluate": {"countermem_jax.phases", "countermem_jax.cli"},
             "countermem_jax.cli": {"countermem_jax.phases.config_validation"}}
    assert _upward_imports(graph) == [
        ("countermem_jax.method.agents", "countermem_jax.protocol.metrics"),
        ("countermem_jax.runtime.runlog", "countermem_jax.method.memory.store")]
    assert _root_strays(["evaluate", "cli", "method", "runlog", "__init__"]) == ["runlog"]
    assert _package_of("countermem_jax.method.memory.store") == "countermem_jax.method.memory"
    assert _package_of("countermem_jax.phases.build") == "countermem_jax.phases"
