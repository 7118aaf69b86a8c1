"""The selector's action space (paper Appendix C.1): action 0 skips, action j ≥ 1 uses slot j.
A decision with nothing retrieved and the terminal transition of a task share one skip-only mask,
derived from ``selector.features`` (its size follows the number of slots)."""
import numpy as np

from countermem_jax.method import memory_use
from countermem_jax.method import text_embedding as embedding
from countermem_jax.method.selector import features
from helpers import make_record


def _mask(candidates):
    budget = features.BudgetState(0, 3, 0, 1000, 0, 3, 0, None)
    empty = np.zeros(embedding.DIM, np.float32)
    return features.build_observation(empty, empty, candidates, budget)[1]


def test_a_decision_with_nothing_retrieved_may_only_skip():
    mask = _mask(())
    assert mask.shape == (features.NUM_ACTIONS,)
    assert np.flatnonzero(mask).tolist() == [features.SKIP]


def test_the_terminal_mask_is_the_mask_of_a_decision_with_nothing_retrieved():
    np.testing.assert_array_equal(memory_use.SKIP_ONLY, _mask(()))
    np.testing.assert_array_equal(features.skip_only_mask(), _mask(()))


def test_each_retrieved_record_opens_the_action_of_its_slot():
    class Candidate:
        record, relevance = make_record(), 0.5
    mask = _mask((Candidate(), Candidate()))
    assert np.flatnonzero(mask).tolist() == [features.SKIP, 1, 2]
