"""Seeded, disjoint task splits (paper Appendix C.3 Eq. 13 and Appendix D.2).

build ∪ train must not meet eval. The default follows the held-out SQL configuration: evaluation
tasks are sampled with seed 12345, construction tasks with seed 12345 + 8675309 (identifiers shared
with evaluation removed); selector-training and validation tasks come from what is left. With
``separate_environments`` the environments (databases) are split first, so no evaluation database
is seen during construction or training.
"""
import dataclasses
import random
from typing import Sequence

EVAL_SEED = 12345
BUILD_SEED = 12345 + 8675309
TRAIN_SEED = 12345 + 2 * 8675309


class SplitError(ValueError):
    """The splits overlap or cannot be drawn; binaries refuse to run."""


@dataclasses.dataclass(frozen=True)
class Splits:
    build: tuple
    train: tuple
    validation: tuple
    eval: tuple

    def check(self) -> None:
        ids = lambda ts: {t.task_id for t in ts}
        leak = (ids(self.build) | ids(self.train) | ids(self.validation)) & ids(self.eval)
        if leak:
            raise SplitError(f"{len(leak)} evaluation task(s) also appear in construction or "
                             f"training, e.g. {sorted(leak)[:3]}")
        if ids(self.validation) & ids(self.train):
            raise SplitError("selector-validation tasks overlap selector-training tasks")

    def summary(self) -> dict:
        return {name: len(getattr(self, name)) for name in ("build", "train", "validation", "eval")}


def make_splits(tasks: Sequence, n_build: int, n_train: int, n_validation: int, n_eval: int,
                separate_environments: bool = False, env_fraction_eval: float = 0.5) -> Splits:
    tasks = sorted(tasks, key=lambda t: t.task_id)
    if separate_environments:
        envs = sorted({t.environment for t in tasks})
        random.Random(EVAL_SEED).shuffle(envs)
        n_env_eval = max(1, round(len(envs) * env_fraction_eval))
        eval_envs = set(envs[:n_env_eval])
        if len(eval_envs) == len(envs):
            raise SplitError("need at least two environments to separate them")
        eval_pool = [t for t in tasks if t.environment in eval_envs]
        rest = [t for t in tasks if t.environment not in eval_envs]
    else:
        eval_pool, rest = tasks, tasks
    if n_eval > len(eval_pool):
        raise SplitError(f"asked for {n_eval} evaluation tasks, only {len(eval_pool)} available")
    evaluation = random.Random(EVAL_SEED).sample(eval_pool, n_eval)
    eval_ids = {t.task_id for t in evaluation}
    rest = [t for t in rest if t.task_id not in eval_ids]
    build = [t for t in random.Random(BUILD_SEED).sample(rest, min(n_build, len(rest)))]
    # Training may share identifiers with construction (Appendix C.3); validation may not share
    # with training, and neither touches evaluation.
    pool = random.Random(TRAIN_SEED).sample(rest, len(rest))
    validation = pool[:n_validation]
    remaining = pool[n_validation:]
    build_ids = {t.task_id for t in build}
    train = [t for t in remaining if t.task_id not in build_ids][:n_train]
    if len(train) < n_train:
        train += [t for t in remaining if t.task_id in build_ids][: n_train - len(train)]
    splits = Splits(tuple(build), tuple(train), tuple(validation), tuple(evaluation))
    splits.check()
    return splits


def from_manifest(tasks: Sequence, manifest: dict) -> Splits:
    """Exact splits from a manifest {"build": [ids], "train": [...], "validation": [...],
    "eval": [...]} (what ``WORKDIR/splits.json`` records), checked like sampled ones."""
    by_id = {t.task_id: t for t in tasks}
    parts = {}
    for name in ("build", "train", "validation", "eval"):
        missing = [i for i in manifest.get(name, []) if i not in by_id]
        if missing:
            raise SplitError(f"manifest {name!r} names unknown task ids, e.g. {missing[:3]}")
        parts[name] = tuple(by_id[i] for i in manifest.get(name, []))
    splits = Splits(**parts)
    splits.check()
    return splits
