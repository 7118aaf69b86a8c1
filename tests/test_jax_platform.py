"""The binaries set JAX's platform and allocator before JAX is imported: the CPU unless
``--jax_gpu``, and never a preallocated GPU (vLLM holds the GPUs on a serving host)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from countermem_jax.runtime import jax_platform

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Imports a binary's module as `python -m` would (its __main__ block does not run) and reports
# the environment as it was when JAX was first imported, and JAX's platform setting after.
_PROBE = """
import importlib.abc, json, os, sys
seen = {}
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "jax" and not seen:
            seen.update(platforms=os.environ.get("JAX_PLATFORMS"),
                        preallocate=os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"))
        return None
sys.meta_path.insert(0, Watch())
sys.argv = ["binary", *json.loads(sys.argv[1])]
importlib.import_module(MODULE)
import jax
print(json.dumps(dict(seen, config=jax.config.jax_platforms)))
"""


def _probe(module, *argv, env_platforms=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE")}
    if env_platforms:
        env["JAX_PLATFORMS"] = env_platforms
    out = subprocess.run([sys.executable, "-c", _PROBE.replace("MODULE", repr(module)), json.dumps(argv)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["countermem_jax.build_memory", "countermem_jax.train_selector",
                                    "countermem_jax.evaluate", "countermem_jax.study"])
def test_binaries_keep_jax_on_the_cpu_before_it_is_imported(module):
    assert _probe(module) == {"platforms": "cpu", "preallocate": "false", "config": "cpu"}


def test_jax_gpu_flag_lets_jax_use_the_gpu_without_preallocating():
    assert _probe("countermem_jax.train_selector", "--jax_gpu") == {
        "platforms": "cuda,cpu", "preallocate": "false", "config": "cuda,cpu"}


def test_an_exported_platform_is_kept_without_the_flag():
    assert _probe("countermem_jax.evaluate", env_platforms="cuda")["platforms"] == "cuda"


def test_the_sweep_binary_sets_jax_config_its_package_imported_first():
    # countermem_jax.sweep's package imports JAX before its __main__ runs
    assert _probe("countermem_jax.sweep.__main__")["config"] == "cpu"


@pytest.mark.parametrize("argv, expected", [
    ([], None), (["--jax_gpu"], True), (["--nojax_gpu"], False),
    (["--jax_gpu", "--jax_gpu=false"], False), (["--", "--jax_gpu"], None)])
def test_flag_is_read_as_absl_reads_it(argv, expected):
    assert jax_platform._asked_for_gpu(["binary", *argv]) is expected
