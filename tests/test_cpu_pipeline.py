"""A short real run: the CPU model on three Spider questions through construction, every decision
logged (runs when the cpu extra, the model packages and the Spider data are present)."""
import pytest

from countermem_jax import experiment
from countermem_jax.runtime.runlog import RunLog

pytest.importorskip("llama_cpp", reason="cpu extra (llama-cpp-python) not installed")


def test_three_spider_questions_with_the_cpu_model(tmp_path, benchdata):
    from countermem_jax.backbones import gguf
    try:
        gguf.default_model_path()
    except gguf.ModelFileError as err:
        pytest.skip(str(err))
    import importlib.util
    spec = importlib.util.spec_from_file_location("cfg", "configs/spider_react_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cfg = module.get_config()
    cfg.splits.update(n_build=3, n_train=1, n_validation=1, n_eval=3)
    cfg.data.db_ids = ("concert_singer", "pets_1")
    cfg.construction.verification_budget = 2
    cfg.agent.max_tokens = 120
    summary = experiment.build_memory(cfg, tmp_path, backbone=None)
    log = RunLog(tmp_path / "log.jsonl")
    ends = log.events("task_end")
    assert len(ends) == 3 and summary["tasks"] == 3
    decisions = log.events("decision")
    for end in ends:
        mine = [d for d in decisions if d["task_id"] == end["task_id"]]
        assert len(mine) == end["decisions"] >= 1
        for d in mine:
            assert d["draft"] and "utility" in d["outcome"] and "retrieved" in d["memory"]
    assert (tmp_path / "store_frozen.jsonl").exists()
