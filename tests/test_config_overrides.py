"""Config overrides: the phase binaries lock the config, so an override naming a field
that does not exist fails in one line instead of silently adding the field; and every override
the README, launch scripts, configs and tests use names a field that ``configs/default.py`` declares."""
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

from helpers import default_config

ROOT = pathlib.Path(__file__).resolve().parents[1]
_OVERRIDE = re.compile(r"--config\.([A-Za-z_][\w.]*\w)")


def _documented_overrides() -> dict[str, str]:
    """Override path -> one file using it, over README, docs/, .ci, launch/, configs/, tests/ and the
    library (docstrings print commands too); a quoted refusal ("has no field") is no use."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / ".ci").rglob("*")),
             *sorted((ROOT / "launch").rglob("*")), *sorted((ROOT / "configs").glob("*.py")),
             *sorted((ROOT / "tests").glob("*.py")),
             *sorted((ROOT / "countermem_jax").rglob("*.py"))]
    found = {}
    for path in files:
        if path.is_file():
            for line in path.read_text(encoding="utf-8", errors="ignore").splitlines():
                for match in _OVERRIDE.finditer("" if "has no field" in line else line):
                    found.setdefault(match.group(1), str(path.relative_to(ROOT)))
    return found


def _declared(config, dotted: str) -> bool:
    for key in dotted.split("."):
        if not hasattr(config, "keys") or key not in config:
            return False
        config = config[key]
    return True


def test_every_override_in_use_is_declared_in_the_default_config():
    found = _documented_overrides()
    assert "backbone.base_urls" in found and "splits.n_build" in found   # the scan sees them
    # a study config (configs/studies) holds the per-run config under "base", its own fields
    # (the four-domain grid, a protocol study's "protocol" section) beside it
    studies = []
    for path in sorted((ROOT / "configs/studies").glob("*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        studies.append(module.get_config())
        if path.stem == "components":
            studies.append(module.get_config("four_domains"))
    missing = {path: where for path, where in found.items()
               if not _declared(default_config(), path.removeprefix("base."))
               and not any(_declared(study, path) for study in studies)}
    assert not missing, f"overrides of fields configs/default.py does not declare: {missing}"


@pytest.mark.parametrize("typo, field, hint", [
    ("splits." + "n_evall=3", "n_evall", "n_eval"),
    ("splitz" + ".n_eval=3", "splitz", "splits"),
])
def test_a_misspelled_override_fails_in_one_line_before_any_model(tmp_path, typo, field, hint):
    workdir = tmp_path / "wd"
    out = subprocess.run(
        [sys.executable, "-m", "countermem_jax.build_memory",
         "--config=configs/spider_react_cpu.py", f"--workdir={workdir}",
         "--config.backbone.model_path=/nonexistent.gguf", f"--config.{typo}"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and len(lines) == 1, out.stderr
    assert lines[0] == (f"error: no such config field: '{field}' "   # ml_collections' words
                        f'Did you mean "{hint}" instead of "{field}"?')
    assert not workdir.exists()
