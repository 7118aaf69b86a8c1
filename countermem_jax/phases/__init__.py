"""The three phases of Algorithm 1 (paper Appendix C.3), one module each.

  workdir.py   ``Workdir``: the experiment's artefacts and their fingerprints;
  context.py   what every phase sets up (benchmark, splits, backbone) and the config builders;
  build.py     phase 1, memory construction (Modules I–II, §3.2–3.3);
  train.py     phase 2, the DQN selector per seed (§3.4, Appendix C.2), its loop on one
               screen (dqn_loop; waves and resumption are its arguments);
  evaluate.py  phase 3, held-out evaluation with frozen store and selector (§4, Appendix D.4).
Beside them: construction_waves.py (construction tasks in flight), workdir_guard.py (one writer
per phase), config_fingerprint.py (one config per workdir), config_validation.py.
"""
from countermem_jax.phases.build import build_memory
from countermem_jax.phases.evaluate import METHOD_LABELS, evaluate
from countermem_jax.phases.train import train_selector
from countermem_jax.phases.workdir import PhaseError, Workdir

__all__ = ["build_memory", "train_selector", "evaluate", "METHOD_LABELS", "PhaseError",
           "Workdir"]
