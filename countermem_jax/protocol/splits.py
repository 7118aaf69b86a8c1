"""Seeded, disjoint task splits (paper Appendix C.3 Eq. 14 and Appendix D.2)."""
import collections
import dataclasses
import logging
import random
from typing import Callable, Mapping, Sequence

from countermem_jax.runtime.errors import UserError
from evaluators.grouping import digest, group_key as reference_group

log = logging.getLogger(__name__)

EVAL_SEED = 12345
BUILD_SEED = 12345 + 8675309
# Not given by the paper; chosen apart from the two D.2 seeds so no split reuses a stream.
TRAIN_SEED = 12345 + 2 * 8675309
PARTS = ("build", "train", "validation", "eval")
# Split seed s > 0 offsets the three D.2 streams by 3·8675309·s: every (seed, split) pair has its
# own stream, and split seed 0 keeps the paper's.
_SEED_STEP = 3 * 8675309


class SplitError(UserError, ValueError):
    """The splits overlap or cannot be drawn; binaries refuse to run.

    Raised before any model is loaded, so a bad split request costs nothing and stores nothing.
    """


@dataclasses.dataclass(frozen=True)
class Splits:
    """The four task sets of one experiment, as tuples of tasks in their drawn order.

    ``build`` is T_build (memory construction), ``train`` is T_train (selector training),
    ``validation`` the selector-validation subset, ``eval`` is T_eval (held-out testing);
    ``info`` records how they were drawn (seeds, grouping, removed overlaps) for the manifest.
    """
    build: tuple
    train: tuple
    validation: tuple
    eval: tuple
    info: Mapping = dataclasses.field(default_factory=dict, compare=False)
    groups: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)

    def check(self, group_of: Mapping[str, str] | None = None) -> None:
        """Refuses shared ids between evaluation and the rest, and between validation and
        training; with ``group_of`` (task id -> group), shared groups too."""
        for key, what in ((lambda t: t.task_id, "task"),) + (
                ((lambda t: group_of[t.task_id], "reference group"),) if group_of else ()):
            keys = lambda ts: {key(t) for t in ts}
            leak = (keys(self.build) | keys(self.train) | keys(self.validation)) & keys(self.eval)
            if leak:
                if what == "task":
                    raise SplitError(f"{len(leak)} evaluation task(s) also appear in construction "
                                     f"or training, e.g. {sorted(leak)[:3]}")
                raise SplitError(f"{len(leak)} {what}(s) of evaluation tasks also appear in "
                                 f"construction or training, e.g. {sorted(leak)[:3]}")
            if keys(self.validation) & keys(self.train):
                raise SplitError(f"selector-validation tasks overlap selector-training tasks "
                                 f"(by {what})")

    def summary(self) -> dict:
        """Number of tasks per split, keyed by split name."""
        return {name: len(getattr(self, name)) for name in PARTS}

    def manifest(self) -> dict:
        """What ``WORKDIR/splits.json`` records: the ids per split and how they were drawn."""
        return {**{name: [t.task_id for t in getattr(self, name)] for name in PARTS},
                **dict(self.info)}


def same_assignment(previous: Mapping, manifest: Mapping) -> bool:
    """Do two recorded manifests put the same tasks in the same splits? (Extra fields, and their
    absence in manifests written before them, do not matter.)"""
    return all(list(previous.get(n, [])) == list(manifest.get(n, [])) for n in PARTS)


def _groups(tasks: Sequence, group_by_reference: bool,
            key: Callable | None) -> dict[str, str]:
    """task id → group key: the reference group with grouping on, the task's own id without."""
    if not group_by_reference:
        return {t.task_id: t.task_id for t in tasks}
    key = key or reference_group
    return {t.task_id: key(t) for t in tasks}


def reference_groups(tasks: Sequence, key: Callable | None = None) -> dict[str, str]:
    """task id → reference group id (a short digest of the group key; ``key`` overrides
    ``evaluators.grouping.group_key``)."""
    key = key or reference_group
    return {t.task_id: digest(key(t)) for t in tasks}


def _group_ids(tasks: Sequence, group_of: Mapping[str, str], group_by_reference: bool,
               key: Callable | None) -> dict[str, str]:
    """The ``Splits.groups`` of ``tasks``: digests of the keys already computed when the splits
    were drawn by group, computed afresh otherwise."""
    if group_by_reference:
        return {t.task_id: digest(group_of[t.task_id]) for t in tasks}
    return reference_groups(tasks, key)


def _group_info(tasks: Sequence, group_of: Mapping[str, str], group_by_reference: bool) -> dict:
    """Manifest fields describing the grouping: pool size, group count, tasks in shared groups."""
    sizes = collections.Counter(group_of[t.task_id] for t in tasks)
    return {"grouping": "reference" if group_by_reference else "none", "pool_tasks": len(tasks),
            "groups": len(sizes),
            "tasks_sharing_a_group": sum(n for n in sizes.values() if n > 1)}


def _environments(tasks: Sequence, n_build_envs: int, n_eval_envs: int):
    """Disjoint (evaluation, construction) environment sets, drawn with the evaluation seed.

    The counts must be given explicitly and fit the loaded environments; otherwise a
    ``SplitError`` says which config fields to change.
    """
    envs = sorted({t.environment for t in tasks})
    if n_eval_envs < 1 or n_build_envs < 1:
        raise SplitError("separate_environments needs explicit environment counts: "
                         "splits.n_eval_envs and splits.n_build_envs (≥ 1 each)")
    if n_eval_envs + n_build_envs > len(envs):
        raise SplitError(
            f"asked for {n_build_envs} construction + {n_eval_envs} evaluation environments, but "
            f"the loaded tasks have only {len(envs)}; lower splits.n_build_envs / "
            f"splits.n_eval_envs (the paper's 35 / 34 Spider databases need the train and dev "
            f"databases together)")
    random.Random(EVAL_SEED).shuffle(envs)
    return set(envs[:n_eval_envs]), set(envs[n_eval_envs: n_eval_envs + n_build_envs])


def stream_seeds(split_seed: int = 0) -> tuple[int, int, int]:
    """The (evaluation, construction, training) random seeds of split seed ``split_seed``."""
    step = _SEED_STEP * split_seed
    return EVAL_SEED + step, BUILD_SEED + step, TRAIN_SEED + step


def evaluation_folds(tasks: Sequence, group_of: Mapping[str, str], n_eval: int,
                     folds: int) -> list[list]:
    """``folds`` disjoint evaluation sets of exactly ``n_eval`` tasks each, made of whole
    reference groups: the groups are shuffled once (D.2's evaluation seed) and each fold takes,
    in that order, every group still unused that fits in it (one short, it trades one of its
    groups for an unused one a task larger). A ``SplitError`` says when the pool
    is too small for that (then ``splits.folds=0``: independent draws per split seed)."""
    members: dict[str, list] = {}
    for t in tasks:
        members.setdefault(group_of[t.task_id], []).append(t)
    order = sorted(members)
    random.Random(EVAL_SEED).shuffle(order)
    out = []
    for fold in range(folds):
        chosen, left, size = [], [], 0
        for g in order:
            if size + len(members[g]) <= n_eval:
                chosen.append(g)
                size += len(members[g])
            else:
                left.append(g)
        if size < n_eval:   # pairs of twins can leave a fold short: swap one group for a bigger
            swap = next(((g, h) for g in chosen for h in left
                         if len(members[h]) - len(members[g]) == n_eval - size), None)
            if swap:
                chosen[chosen.index(swap[0])] = swap[1]
                left[left.index(swap[1])] = swap[0]
                size = n_eval
        if size < n_eval:
            raise SplitError(
                f"{len(tasks)} tasks in {len(members)} reference groups cannot give {folds} "
                f"disjoint evaluation folds of {n_eval} tasks (fold {fold} got {size}); lower "
                f"splits.n_eval or splits.folds, or set splits.folds=0 (independent draws)")
        out.append([t for g in chosen for t in members[g]])
        order = left
    return out


def make_splits(tasks: Sequence, n_build: int, n_train: int, n_validation: int, n_eval: int,
                separate_environments: bool = False, n_build_envs: int = 0,
                n_eval_envs: int = 0, group_by_reference: bool = True,
                group_key: Callable | None = None, split_seed: int = 0,
                folds: int = 0, held_out_of_eval: frozenset = frozenset()) -> Splits:
    """Draws the four splits from ``tasks`` as docs/protocol.md (Splits) describes, then checks
    them.

    ``n_*`` are the requested sizes (construction may come out smaller after overlap removal);
    ``group_key`` overrides ``evaluators.grouping.group_key`` (tests use it); ``split_seed`` and
    ``folds`` pick other streams and a fold of disjoint evaluation sets (docs/protocol.md);
    ``held_out_of_eval`` names task ids whose reference groups never enter evaluation (the
    report-pool questions a probe read before the pools were fixed, ``pools.py``). The
    input order does not matter: tasks are sorted by id first, so the same pool always gives the
    same splits.
    """
    # Sampling from a sorted pool makes the splits independent of the loader's order.
    tasks = sorted(tasks, key=lambda t: t.task_id)
    group_of = _groups(tasks, group_by_reference, group_key)
    info = _group_info(tasks, group_of, group_by_reference)
    eval_seed, build_seed, train_seed = stream_seeds(split_seed)
    info["seeds"] = {"eval": eval_seed, "build": build_seed, "train": train_seed}
    if split_seed or folds:   # recorded only when set: default manifests stay as they were
        info.update(split_seed=split_seed, folds=folds)
    if folds and not 0 <= split_seed < folds:
        raise SplitError(f"splits.seed={split_seed} names no fold of splits.folds={folds}")
    if separate_environments:
        eval_envs, build_envs = _environments(tasks, n_build_envs, n_eval_envs)
        eval_pool = [t for t in tasks if t.environment in eval_envs]
        build_pool = [t for t in tasks if t.environment in build_envs]
        info["environments"] = {"eval": sorted(eval_envs), "build": sorted(build_envs)}
    else:
        eval_pool, build_pool = tasks, tasks
    if held_out_of_eval:
        seen_groups = {group_of[t.task_id] for t in tasks if t.task_id in held_out_of_eval}
        eval_pool = [t for t in eval_pool if group_of[t.task_id] not in seen_groups]
        info["held_out_of_eval"] = sum(t.task_id in held_out_of_eval for t in tasks)
    if n_eval > len(eval_pool):
        raise SplitError(f"asked for {n_eval} evaluation tasks, only {len(eval_pool)} available")
    if folds:
        evaluation = evaluation_folds(eval_pool, group_of, n_eval, folds)[split_seed]
    else:
        evaluation = random.Random(eval_seed).sample(eval_pool, n_eval)
    eval_groups = {group_of[t.task_id] for t in evaluation}
    # D.2: construction is drawn from the whole pool with its own seed; what it shares with
    # evaluation (ids, and with grouping their twins) is removed afterwards.
    drawn = random.Random(build_seed).sample(build_pool, min(n_build, len(build_pool)))
    build = [t for t in drawn if group_of[t.task_id] not in eval_groups]
    info["build_drawn"] = len(drawn)
    info["build_removed_shared_with_eval"] = len(drawn) - len(build)
    rest = [t for t in build_pool if group_of[t.task_id] not in eval_groups]
    # Training may share identifiers with construction (Appendix C.3); validation shares no group
    # with training, and neither touches evaluation.
    pool = random.Random(train_seed).sample(rest, len(rest))
    validation = pool[:n_validation]
    val_groups = {group_of[t.task_id] for t in validation}
    remaining = [t for t in pool[n_validation:] if group_of[t.task_id] not in val_groups]
    build_ids = {t.task_id for t in build}
    train = [t for t in remaining if t.task_id not in build_ids][:n_train]
    # Only when disjoint tasks run out does training reuse construction ids (allowed by C.3).
    if len(train) < n_train:
        train += [t for t in remaining if t.task_id in build_ids][: n_train - len(train)]
    chosen = list({t.task_id: t for t in (*build, *train, *validation, *evaluation)}.values())
    splits = Splits(tuple(build), tuple(train), tuple(validation), tuple(evaluation), info,
                    _group_ids(chosen, group_of, group_by_reference, group_key))
    splits.check(group_of)
    return splits


def from_manifest(tasks: Sequence, manifest: dict, group_by_reference: bool = True,
                  group_key: Callable | None = None) -> Splits:
    """Exact splits from a manifest {"build": [ids], "train": [...], "validation": [...],
    "eval": [...]} (what ``WORKDIR/splits.json`` records), checked like sampled ones by task id.
    Reference groups crossing evaluation and the rest are counted (``groups_across_splits``)
    and warned about, not refused, so that manifests written before grouping still load."""
    by_id = {t.task_id: t for t in tasks}
    parts = {}
    for name in PARTS:
        missing = [i for i in manifest.get(name, []) if i not in by_id]
        if missing:
            raise SplitError(f"manifest {name!r} names unknown task ids, e.g. {missing[:3]}")
        parts[name] = tuple(by_id[i] for i in manifest.get(name, []))
    used = [t for name in PARTS for t in parts[name]]
    group_of = _groups(used, group_by_reference, group_key)
    info = _group_info(list({t.task_id: t for t in used}.values()), group_of, group_by_reference)
    eval_ids = {t.task_id for t in parts["eval"]}
    eval_groups = {group_of[i] for i in eval_ids}
    crossing = {group_of[t.task_id] for name in ("build", "train", "validation")
                for t in parts[name] if group_of[t.task_id] in eval_groups
                and t.task_id not in eval_ids}
    info["groups_across_splits"] = len(crossing)
    if crossing:
        log.warning("manifest: %d reference group(s) have tasks both in evaluation and in "
                    "construction/training (paraphrase twins?)", len(crossing))
    unique = list({t.task_id: t for t in used}.values())
    splits = Splits(**parts, info=info,
                    groups=_group_ids(unique, group_of, group_by_reference, group_key))
    splits.check()
    return splits
