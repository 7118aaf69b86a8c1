"""Which record leaves when the store is over capacity (Appendix B.3 and D.3, panel d)."""
from typing import Sequence

import numpy as np

from countermem_jax.method.memory import scoring
from countermem_jax.method.memory.record import MemoryRecord
from countermem_jax.method import text_embedding as embedding

# The four retention rules compared at equal capacity (Appendix D.3, panel d).
RULES = ("utility", "recency", "random", "similarity")


def choose_victim(records: Sequence[MemoryRecord], advice_matrix: np.ndarray, rule: str, seed: int,
                  eviction_index: int, weights: scoring.RetentionWeights) -> int:
    """Index (into ``records``) of the record to evict under retention ``rule``.

    ``eviction_index`` (how many evictions the store has made) seeds the ``random`` rule together
    with ``seed``, so a rebuilt store evicts the same records in the same order. An unknown rule
    raises ``ValueError`` listing ``RULES``.
    """
    seqs = np.array([r.insertion_seq for r in records])
    if rule == "utility":
        return _lowest(scoring.keep_scores(records, advice_matrix, weights), seqs)
    if rule == "recency":
        return int(np.argmin(seqs))
    if rule == "random":
        return int(np.random.default_rng([seed, eviction_index]).integers(len(records)))
    if rule == "similarity":
        situations = embedding.embed_texts([r.situation for r in records])
        return _lowest(-scoring.max_similarity_to_others(situations), seqs)
    raise ValueError(f"unknown retention rule {rule!r}; expected one of {RULES}")


def _lowest(scores: np.ndarray, seqs: np.ndarray) -> int:
    """argmin of scores, ties broken by the oldest insertion."""
    return int(np.lexsort((seqs, scores))[0])
