"""Hyper-parameters of the baseline mechanisms (issue 15; paper §4.1, Appendix D.5).

The paper fixes only Best-of-N's N = 1 + K = 5 (Appendix D.5); the other values follow each
original where it states one (cited below) and are our choice otherwise (said so). The section of a
method is stored in its memory file's header and hashed with it, so a memory is never used under
different settings than it was built with.
"""
import ml_collections


def default_config() -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict(dict(
        # Appendix D.5: N = 1 + K candidates, K = 4 (the counterfactual K); extra candidates are
        # sampled at this temperature (our choice: at temperature 0 all candidates would be equal).
        best_of_n=dict(k=4, temperature=0.7),
        # ExpeL (Zhao et al. 2024): ADD starts an insight at importance 2, AGREE/EDIT +1, REMOVE -1,
        # an insight at 0 is dropped; successes are compared in batches. Cap, batch size and the
        # number of few-shot trajectories are our choice (the paper gives none).
        expel=dict(max_insights=20, success_batch=4, fewshot_k=2),
        # Generative Agents (Park et al. 2023): reflect when summed importance passes 150, over
        # the last 100 memories; recency decays by 0.995 per step; score = sum of the min-max
        # normalised recency, importance and relevance with weights 1; top 3 (our choice).
        generative_agents=dict(reflection_threshold=150, reflection_window=100,
                               recency_decay=0.995, weights=(1.0, 1.0, 1.0), top_k=3),
        # Voyager (Wang et al. 2023): top-5 skills by description similarity.
        voyager=dict(top_k=5),
        # MemGPT (Packer et al. 2023): 2,000 characters per core block; archival search pages of
        # 5 passages; up to 3 function steps per memory event (our choice); the whole memory
        # context shown to the agent is bounded by context_chars (the template's 4,000 limit).
        memgpt=dict(block_chars=2000, page_size=5, max_steps=3, context_chars=4000),
        # ReasoningBank (Ouyang et al.): top-1 retrieval; MaTTS parallel scaling with k = 3
        # rollouts per task sampled at temperature 0.7 (our choice within the paper's k range).
        reasoningbank=dict(top_k=1, matts_k=3, matts_temperature=0.7),
    ))


def section(cfg, method: str) -> dict:
    """The settings of ``method`` from an experiment config (defaults where it has none)."""
    key = "reasoningbank" if method.startswith("reasoningbank") else method
    defaults = default_config()[key].to_dict()
    given = cfg.get("baselines") if cfg is not None else None
    if given is not None and key in given:
        defaults.update(given[key].to_dict())
    return {k: list(v) if isinstance(v, tuple) else v for k, v in defaults.items()}
