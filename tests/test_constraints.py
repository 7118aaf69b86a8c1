"""The pinned versions (launch/constraints.txt) agree with setup.py, and every way of installing uses them."""
import ast
import pathlib
import re

import pytest
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parents[1]
PINNED_EXTRAS = ("test", "solvers", "llm", "cpu", "plots", "sweep", "curves")   # install.sh's


def _name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(text):
    pins = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if match:
            pins[_name(match.group(1))] = match.group(2)
    return pins


def _setup_requirements():
    """setup.py's core and the pinned extras' requirements, read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    values = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name) and t.id in ("_CORE", "_EXTRAS")}
    reqs = list(values["_CORE"]) + [r for extra in PINNED_EXTRAS for r in values["_EXTRAS"][extra]]
    return [Requirement(r) for r in reqs]


def test_every_direct_requirement_is_pinned_inside_its_bounds():
    pins = _pins((ROOT / "launch/constraints.txt").read_text(encoding="utf-8"))
    for req in _setup_requirements():
        assert _name(req.name) in pins, f"{req.name} is not in launch/constraints.txt"
        assert req.specifier.contains(pins[_name(req.name)], prereleases=True), \
            f"{req.name}=={pins[_name(req.name)]} is outside setup.py's {req.specifier}"


def test_every_direct_requirement_has_an_upper_bound():
    for req in _setup_requirements():
        assert any(s.operator in ("<", "==", "~=") for s in req.specifier), f"{req} has no ceiling"


def test_a_pin_outside_the_bounds_is_caught():
    pins = _pins("pytest==10.0.1\n    # via countermem-jax\n")
    assert not Requirement("pytest>=8.0,<10").specifier.contains(pins["pytest"])


@pytest.mark.parametrize("script", ["launch/install.sh"])
def test_install_uses_the_constraints(script):
    text = (ROOT / script).read_text(encoding="utf-8")
    assert "-c launch/constraints.txt" in text


def test_ci_builds_its_own_environment_and_runs_the_readme_command():
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python3 -m venv .venv" in ci and ". .venv/bin/activate" in ci
    assert ci.index(". .venv/bin/activate") < ci.index("bash launch/setup.sh")
    assert ci.index("bash launch/setup.sh") < ci.index("bash launch/test.sh")
    assert "bash launch/test.sh" in readme
    assert "python -m pytest -q tests" in (ROOT / "launch/test.sh").read_text(encoding="utf-8")


def _all_declared():
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    values = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name) and t.id in ("_CORE", "_EXTRAS")}
    reqs = list(values["_CORE"]) + [r for v in values["_EXTRAS"].values() for r in v]
    return {_name(Requirement(r).name) for r in reqs}


def _third_party_imports(package: pathlib.Path) -> dict:
    """{top-level module: a file importing it} for the modules ``package`` imports that are
    neither the standard library nor the project's own."""
    import sys
    out = {}
    for path in package.rglob("*.py"):
        if "harness" in path.parts:
            continue   # runs in the sandbox under Debian's interpreter (launch/system_packages.sh)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module
                     and not node.level else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("countermem_jax",
                                                                       "evaluators", "benchmarks"):
                    out.setdefault(top, str(path.relative_to(ROOT)))
    return out


def test_every_third_party_import_is_declared_in_setup_py():
    """A module the code imports comes from a distribution setup.py names (core or an extra),
    so a newcomer's install has it (jsonschema was imported and only came in by chance)."""
    from importlib import metadata
    providers = metadata.packages_distributions()
    declared = _all_declared()
    missing = {}
    imports = {**_third_party_imports(ROOT / "evaluators"),
               **_third_party_imports(ROOT / "countermem_jax"),
               **_third_party_imports(ROOT / "benchmarks")}
    for module, where in sorted(imports.items()):
        dists = {_name(d) for d in providers.get(module, [])}
        if module in ("torch", "vllm", "llama_cpp", "tensorboardX") and not dists:
            continue   # optional extras not installed in every environment
        if not dists & declared:
            missing[module] = where
    assert not missing, f"imported but not declared in setup.py: {missing}"
