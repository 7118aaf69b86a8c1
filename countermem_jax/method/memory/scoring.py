"""Admission and retention scores, paper Appendix B.1 (Eq. 4, S_adm) and B.3 (Eq. 5, S_keep)."""
import dataclasses
from typing import Sequence

import numpy as np

from countermem_jax.method.memory.record import MemoryRecord, normalize_action
from countermem_jax.method import text_embedding as embedding


# Utilities are floats: 0.55 - 0.5 is 0.05000000000000004. A gain within this tolerance of ε is
# treated as equal to ε and rejected, as "Δ > ε" intends.
_DELTA_TOLERANCE = 1e-9


@dataclasses.dataclass(frozen=True)
class AdmissionConfig:
    """Admission gate and S_adm weights (Eq. 4), from ``memory.admission`` and
    ``construction.epsilon`` (the paper's values are stated there, Appendix B.4).

    ``epsilon`` is ε_adm, the floor on the raw gain Δ; ``w_delta``, ``w_reuse``, ``w_repeat``,
    ``w_conflict`` are (λ_Δ, λ_u, λ_r, λ_I); ``threshold`` is τ_adm, which the score must
    strictly exceed.
    """
    epsilon: float
    w_delta: float
    w_reuse: float
    w_repeat: float
    w_conflict: float
    threshold: float


@dataclasses.dataclass(frozen=True)
class RetentionWeights:
    """Coefficients (α, β, ω, η) of S_keep (Eq. 5), from ``memory.retention_weights`` (the
    paper's values are stated there, Appendix B.4).

    They weight checked improvement Δ̃, reuse utility ũ, use frequency F and redundancy R.
    """
    alpha: float
    beta: float
    omega: float
    eta: float


@dataclasses.dataclass(frozen=True)
class AdmissionDecision:
    """Why a candidate was or was not admitted, kept in the construction log for every candidate.

    ``score`` is S_adm, or -inf when a gate refused the record before it was scored; ``repeat``
    and ``conflict`` are the R and I terms that entered the score.
    """
    admitted: bool
    reason: str  # "admitted" | "unverified" | "delta<=epsilon" | "duplicate" | "score<=threshold"
    score: float
    delta: float
    repeat: float = 0.0
    conflict: float = 0.0


def normalized_delta(delta: float) -> float:
    """Δ̃ = clip(Δ, 0, 1): a negative gain counts as none, and U's range bounds the top."""
    return float(min(max(delta, 0.0), 1.0))


def normalized_reuse(u: float) -> float:
    """ũ = clip(u, -1, 1), the range of an exponential average of ±1/0 labels."""
    return float(min(max(u, -1.0), 1.0))


def advice_embeddings(records: Sequence[MemoryRecord]) -> np.ndarray:
    """Unit-norm n-gram embeddings of each record's edit (``advice_text``), one row per record.

    Row i belongs to ``records[i]``; R (repeated advice) is a dot product between these rows.
    """
    return embedding.embed_texts([r.advice_text() for r in records])


def repeat_score(candidate_vec: np.ndarray, others: np.ndarray) -> float:
    """R: the closest other advice, as a clipped cosine similarity."""
    if others.shape[0] == 0:
        return 0.0
    return float(np.clip(np.max(others @ candidate_vec), 0.0, 1.0))


def conflict_score(candidate: MemoryRecord, records: Sequence[MemoryRecord]) -> float:
    """I: 1 when the same situation and original action already carry a different correction."""
    q = normalize_action(candidate.situation)
    a_minus = normalize_action(candidate.original_action)
    a_plus = normalize_action(candidate.improved_action)
    for r in records:
        if (normalize_action(r.situation) == q and normalize_action(r.original_action) == a_minus
                and normalize_action(r.improved_action) != a_plus):
            return 1.0
    return 0.0


def is_duplicate(candidate: MemoryRecord, records: Sequence[MemoryRecord]) -> bool:
    """True when a record with the same original action, improved action and condition exists.

    Actions are compared after whitespace normalisation and conditions case-insensitively; the
    situation text is deliberately ignored, since the same fix worded twice is still one fix.
    """
    key = (normalize_action(candidate.original_action), normalize_action(candidate.improved_action),
           candidate.condition.strip().lower())
    return any((normalize_action(r.original_action), normalize_action(r.improved_action),
                r.condition.strip().lower()) == key for r in records)


def admission_decision(candidate: MemoryRecord, records: Sequence[MemoryRecord],
                       advice_matrix: np.ndarray, config: AdmissionConfig) -> AdmissionDecision:
    """Eq. 4 with the verification gate in front of it (Appendix B.1).

    Gates, in order: both checks completed ("unverified" otherwise), Δ > ε_adm ("delta<=epsilon"),
    not an exact duplicate ("duplicate"); only then is S_adm computed and compared with τ_adm.
    ``advice_matrix`` holds the advice embeddings of ``records`` (row-aligned).
    """
    delta = candidate.delta
    if not candidate.evidence.verified:
        return AdmissionDecision(False, "unverified", float("-inf"), delta)
    if not delta - config.epsilon > _DELTA_TOLERANCE:
        return AdmissionDecision(False, "delta<=epsilon", float("-inf"), delta)
    if is_duplicate(candidate, records):
        return AdmissionDecision(False, "duplicate", float("-inf"), delta, repeat=1.0)
    repeat = repeat_score(advice_embeddings([candidate])[0], advice_matrix)
    conflict = conflict_score(candidate, records)
    score = (config.w_delta * normalized_delta(delta)
             + config.w_reuse * normalized_reuse(candidate.reuse_utility)
             - config.w_repeat * repeat - config.w_conflict * conflict)
    admitted = score > config.threshold
    return AdmissionDecision(admitted, "admitted" if admitted else "score<=threshold", score, delta,
                             repeat, conflict)


def keep_scores(records: Sequence[MemoryRecord], advice_matrix: np.ndarray,
                weights: RetentionWeights) -> np.ndarray:
    """Eq. 5 for every record: S_keep = αΔ̃ + βũ + ωF − ηR, R taken against the rest of the store.

    Returns one score per record (same order); the lowest is evicted under the ``utility`` rule.
    """
    n = len(records)
    if n == 0:
        return np.zeros(0)
    delta = np.array([normalized_delta(r.delta) for r in records])
    reuse = np.array([normalized_reuse(r.reuse_utility) for r in records])
    uses = np.array([r.uses for r in records], dtype=np.float64)
    freq = uses / uses.max() if uses.max() > 0 else np.zeros(n)
    repeat = max_similarity_to_others(advice_matrix)
    return weights.alpha * delta + weights.beta * reuse + weights.omega * freq - weights.eta * repeat


def max_similarity_to_others(vectors: np.ndarray) -> np.ndarray:
    """For each row, its largest clipped cosine similarity to any other row."""
    n = vectors.shape[0]
    if n < 2:
        return np.zeros(n)
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    return np.clip(sims.max(axis=1), 0.0, 1.0)
