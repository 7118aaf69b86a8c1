"""Random logged decisions shaped like the selector's (§3.3), for timing its training: the speed
of training does not depend on what the numbers mean."""
import numpy as np

from countermem_jax.method.selector import features, training


def synthetic_log(n: int, seed: int = 0) -> training.TransitionLog:
    """``n`` random decisions (98-d observations, 5 actions with skip always valid, 3-decision
    episodes), all in the "train" split."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n, features.NUM_ACTIONS)) < 0.7
    mask[:, 0] = True
    action = np.array([rng.choice(np.flatnonzero(m)) for m in mask], np.int32)
    return training.TransitionLog(
        obs=rng.normal(size=(n, features.OBS_DIM)).astype(np.float32), action=action,
        reward=rng.normal(size=n).astype(np.float32),
        next_obs=rng.normal(size=(n, features.OBS_DIM)).astype(np.float32),
        next_mask=np.roll(mask, -1, 0), done=(np.arange(n) % 3 == 2).astype(np.float32), mask=mask,
        episode=np.arange(n) // 3, split=np.full(n, "train"))
