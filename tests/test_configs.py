"""Every experiment config loads, names a known benchmark, and documents its commands."""
import importlib.util
import pathlib

import pytest

CONFIGS = sorted((pathlib.Path(__file__).parent.parent / "configs").glob("*.py"))

def _known():
    from countermem_jax import domains
    return set(domains.BENCHMARKS)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_loads_and_documents_itself(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cfg = module.get_config()
    assert cfg.data.benchmark in _known()
    assert cfg.agent.kind in ("react", "reflexion")
    doc = " ".join(module.__doc__.split())
    for binary in ("build_memory", "train_selector", "evaluate"):
        assert f"python -m countermem_jax.{binary} --config=configs/{path.name}" in doc
    if "gptoss" in path.stem:
        assert cfg.backbone.kind == "openai" and cfg.backbone.model == "openai/gpt-oss-120b"
    elif path.stem.endswith("_api"):
        assert cfg.backbone.kind == "openai" and cfg.backbone.api_key_env
    else:
        assert cfg.backbone.kind == "llama_cpp"


def test_there_is_a_config_per_domain():
    names = {p.stem for p in CONFIGS}
    for prefix in ("spider", "bird", "satlib", "smtlib", "quixbugs", "minif2f", "dafnybench"):
        assert any(n.startswith(prefix) for n in names)
