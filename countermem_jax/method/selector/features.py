"""The selector's observation z_t (Appendix C.1, Eq. 9), version 1.

z = [P·E(state) (32) ‖ P·E(draft) (32) ‖ f_1 … f_4 (4 × 7) ‖ b (6)] → 98 dims, float32.

Record slot features, in order (an empty slot is all zeros and masked):
  0 relevance      cos(φ(state), φ(q)) as returned by retrieval, in [-1, 1]
  1 admission      S_adm / 1.5, clipped to [-1, 1] (S_adm of an admitted record is at most 1.5)
  2 improvement    Δ from the record's evidence, in [0, 1]
  3 reuse          u, in [-1, 1]
  4 frequency      log(1 + uses) / log(1 + 100), clipped to [0, 1]
  5 helpful        helpful uses / uses; 0 when never used
  6 validity       1 for a filled slot
Budget features b (from the execution log of the current task):
  0 calls_left     remaining evaluator calls / call budget
  1 tokens_left    remaining tokens / token budget
  2 progress       decision index / max decisions per task
  3 failures       failed attempts so far / call budget
  4 last_utility   U of the previous evaluated attempt (0 if none)
  5 has_attempt    1 if an attempt was already evaluated in this task
Action 0 is skip (always valid); action j ≥ 1 uses slot j.
"""
import dataclasses
import math
from typing import Sequence

import numpy as np

from countermem_jax.method import text_embedding as embedding

OBS_VERSION = 1
NUM_SLOTS = 4
SLOT_FEATURES = 7
BUDGET_FEATURES = 6
TEXT_DIM = embedding.PROJECTION_DIM
OBS_DIM = 2 * TEXT_DIM + NUM_SLOTS * SLOT_FEATURES + BUDGET_FEATURES
SKIP = 0                  # the action that uses no record (always valid)
NUM_ACTIONS = 1 + NUM_SLOTS
SLOT_OFFSET = 2 * TEXT_DIM
BUDGET_OFFSET = SLOT_OFFSET + NUM_SLOTS * SLOT_FEATURES
SLOT_FEATURE_NAMES = ("relevance", "admission", "improvement", "reuse", "frequency", "helpful",
                      "validity")
BUDGET_FEATURE_NAMES = ("calls_left", "tokens_left", "progress", "failures", "last_utility",
                        "has_attempt")
assert OBS_DIM == 98


@dataclasses.dataclass(frozen=True)
class BudgetState:
    """What the execution log says about the current task so far."""
    calls_used: int
    call_budget: int
    tokens_used: int
    token_budget: int
    decision_index: int
    max_decisions: int
    failures: int
    last_utility: float | None

    def features(self) -> np.ndarray:
        """The 6 budget features b of z_t (Eq. 9), in the order of the module docstring."""
        calls = max(self.call_budget, 1)
        return np.array([
            max(0.0, 1.0 - self.calls_used / calls),
            max(0.0, 1.0 - self.tokens_used / max(self.token_budget, 1)),
            min(1.0, self.decision_index / max(self.max_decisions, 1)),
            min(1.0, self.failures / calls),
            0.0 if self.last_utility is None else float(self.last_utility),
            0.0 if self.last_utility is None else 1.0,
        ], dtype=np.float32)


def slot_features(candidate) -> np.ndarray:
    """The 7 features of one retrieved candidate (``retrieve.Candidate``)."""
    r = candidate.record
    return np.array([
        candidate.relevance,
        float(np.clip(r.admission_score / 1.5, -1.0, 1.0)),
        float(np.clip(r.delta, 0.0, 1.0)),
        float(np.clip(r.reuse_utility, -1.0, 1.0)),
        min(1.0, math.log1p(r.uses) / math.log1p(100)),
        r.helpful_fraction,
        1.0,
    ], dtype=np.float32)


def build_observation(state_embedding: np.ndarray, draft_embedding: np.ndarray,
                      candidates: Sequence, budget: BudgetState) -> tuple[np.ndarray, np.ndarray]:
    """Returns (z [98] float32, valid-action mask [5] bool)."""
    if len(candidates) > NUM_SLOTS:
        raise ValueError(f"at most {NUM_SLOTS} candidates fit the selector, got {len(candidates)}")
    obs = np.zeros(OBS_DIM, np.float32)
    obs[:TEXT_DIM] = embedding.project(state_embedding)
    obs[TEXT_DIM:SLOT_OFFSET] = embedding.project(draft_embedding)
    mask = skip_only_mask()
    for j, cand in enumerate(candidates):
        start = SLOT_OFFSET + j * SLOT_FEATURES
        obs[start:start + SLOT_FEATURES] = slot_features(cand)
        mask[j + 1] = True
    obs[BUDGET_OFFSET:] = budget.features()
    return obs, mask


def skip_only_mask() -> np.ndarray:
    """The valid-action mask [5] of a decision with no record to offer: skip alone."""
    mask = np.zeros(NUM_ACTIONS, bool)
    mask[SKIP] = True
    return mask


def relevance_of_slots(obs: np.ndarray) -> np.ndarray:
    """The relevance feature of each slot, [..., 4]."""
    idx = SLOT_OFFSET + np.arange(NUM_SLOTS) * SLOT_FEATURES
    return np.asarray(obs)[..., idx]
