"""Top-k retrieval over eligible records (Appendix B.4, Eq. 7 and 8).

r_i(s) = cos(φ(s), φ(q_i)) + λ_reuse·u_i over the records eligible for the decision, top k = 3.
Why a record is not eligible is one int8 code per (decision, record) (``reasons``, 0 = eligible);
the jitted ``topk_eligible`` masks by it and the log's lists (``RetrievalResult.excluded_*``) are
read from it. A record carries the first reason that holds, in this order:
  SAME_TASK  its source task is in the decision's reference group (``evaluators.grouping``:
             Spider's paraphrase twins share one gold query, so a twin's verified record carries
             the task's own reference answer), in every phase and under every intervention;
  STALE      its checker version or environment changed since its evidence was checked
             (``world``, ``method/memory/world.py``), under every intervention;
  CONDITION  its condition c does not hold for the decision (Eq. 7, ``conditions.checkers``);
  TRANSFER   every transfer try of its edit failed (``MemoryRecord.transfer_failed``);
  NO_PLACE   (``memory.revision=replay``) its checked edit has no place in the decision's draft
             (``edit_replay.record_fits``), so it would leave the draft as it is.
Conditions are judged, and the place test run, only for records no earlier reason excludes.
A record's group is the task pool's group of its source task (``groups``, task id -> group id),
else the group the record carries (``MemoryRecord.source_group``), else its source task alone; a
decision's group is the pool's group of its task, else the group of the records that task wrote,
else the group its ``TaskFacts`` carries.

Queries are scored in blocks of exactly ``QUERY_ROWS`` rows (``runtime/row_blocks``): XLA's CPU
dot rounds a 1-row and a 40-row product differently, and fixed blocks make a query's scores the
same bit for bit whatever other queries share its batch (``retrieval/batching.py``).

``intervention`` changes which records reach the selector (§6.2, Appendix D.5), deterministically
given ``intervention_seed``:
  matched   the default: situation similarity, reuse and every reason above;
  none      no record is ever returned (the LLM receives no memory);
  random    k records drawn uniformly among those neither SAME_TASK nor STALE, with no state
            matching; the draw depends on the seed, the task and the decision state only;
  shuffled  matching runs on the situation, condition and reuse of record π(i) and returns
            record i, π a seeded derangement (a record keeps its own state only in a store of one).
"""
import copy
import dataclasses
import functools
import hashlib
from typing import Callable, Mapping, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np

from countermem_jax.runtime import row_blocks
from countermem_jax.method.memory.record import MemoryRecord
from countermem_jax.method.conditions import TaskFacts
from countermem_jax.method.conditions import checkers as cond_lib
from countermem_jax.method import text_embedding as embedding

REUSE_WEIGHT = 0.2
TOP_K = 3
QUERY_ROWS = 16
INTERVENTIONS = ("matched", "none", "random", "shuffled")
# Why a record is not offered (module docstring); PADDING marks the columns past the last record.
ELIGIBLE, SAME_TASK, STALE, CONDITION, TRANSFER, NO_PLACE, PADDING = range(7)
_NO_QUERY = -2  # a group code no record has


@dataclasses.dataclass(frozen=True)
class RetrievalConfig:
    """Module III's retrieval (§3.4, Eq. 8): k records, reuse weight λ_reuse, the condition
    filter, the studies' evaluation-only interventions (§6.2, Appendix E.3) and the low-utility
    gate of construction (Appendix D.2)."""
    top_k: int                          # memory.top_k
    reuse_weight: float                 # memory.reuse_weight
    use_conditions: bool                # memory.use_conditions
    intervention: str                   # eval.retrieval_intervention
    intervention_seed: int              # eval.intervention_seed
    remove_conditions: bool             # eval.remove_conditions
    suppress_below: float               # memory.suppress_below
    suppress_after_uses: int            # memory.suppress_after_uses


@functools.partial(jax.jit, static_argnames=("k",))
def topk_eligible(queries: jax.Array, keys_t: jax.Array, reuse: jax.Array, reasons: jax.Array,
                  reuse_weight: float, k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Eq. 7-8's scores [Q, k], record indices [Q, k] and their cosine relevance [Q, k].

    ``keys_t`` [D, N] is the record embedding matrix transposed, so that the product needs no
    transpose copy per call; ``reasons`` [Q, N] says why record j is not eligible for query i
    (``ELIGIBLE``: it is). Ineligible slots score -inf.
    """
    chex.assert_rank([queries, keys_t, reuse, reasons], [2, 2, 1, 2])
    chex.assert_type(reasons, jnp.int8)
    chex.assert_equal(queries.shape[1], keys_t.shape[0])
    sims = queries @ keys_t
    scores = jnp.where(reasons == ELIGIBLE, sims + reuse_weight * reuse[None, :], -jnp.inf)
    top_scores, top_idx = jax.lax.top_k(scores, k)
    return top_scores, top_idx, jnp.take_along_axis(sims, top_idx, axis=1)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One retrieved record with its Eq. 8 score (relevance plus weighted reuse), its cosine
    relevance alone, and its 0-based rank among the top k."""
    record: MemoryRecord
    score: float
    relevance: float
    rank: int


@dataclasses.dataclass(frozen=True)
class RetrievalResult:
    """The ranked candidates and, for coverage studies, what was excluded and why (the record
    ids of each reason, ``excluded_same_task`` for SAME_TASK)."""
    task_id: str
    candidates: tuple[Candidate, ...]
    excluded_same_task: tuple[str, ...]
    excluded_condition: tuple[str, ...]
    eligible_count: int
    excluded_no_place: tuple[str, ...] = ()
    excluded_transfer: tuple[str, ...] = ()
    excluded_stale: tuple[str, ...] = ()

    @property
    def covered(self) -> bool:
        """At least one eligible record was returned (the coverage numerator)."""
        return bool(self.candidates)


def _on_device(*arrays: np.ndarray) -> tuple:
    """The index's arrays where ``topk_eligible`` reads them: on an accelerator, copied to it once
    per index; on the CPU backend left as host arrays, which the jitted call reads as fast, while
    a copy would cost more than a retrieval (a construction task's view builds an index per
    change of the store)."""
    if jax.default_backend() == "cpu":
        return arrays
    return tuple(jnp.asarray(a) for a in arrays)


def _padded_size(n: int) -> int:
    return max(8, 1 << max(0, (n - 1).bit_length()))


class RetrievalIndex:
    """Retrieval over a fixed set of records (a frozen snapshot, or the store as it is now);
    ``groups`` maps the task pool's ids to their reference group ids (``Splits.groups``);
    ``world`` says why a record is stale ("" when not: ``world.WorldCheck``), read once here;
    ``fits`` is the replay's place test (None: every record can act)."""

    def __init__(self, records: Sequence[MemoryRecord], *, top_k: int = TOP_K,
                 reuse_weight: float = REUSE_WEIGHT,
                 checker: cond_lib.CompositeChecker | None = None, use_conditions: bool = True,
                 intervention: str = "matched", intervention_seed: int = 0,
                 groups: Mapping[str, str] | None = None,
                 fits: Callable[[MemoryRecord, TaskFacts], bool] | None = None,
                 world: Callable[[MemoryRecord], str] | None = None):
        if intervention not in INTERVENTIONS:
            raise ValueError(f"unknown retrieval intervention {intervention!r}; expected one of "
                             f"{INTERVENTIONS}")
        self.records = tuple(records)
        self.top_k = top_k
        self.reuse_weight = float(reuse_weight)
        self.checker = checker or cond_lib.CompositeChecker()
        self.on_retrieve = None
        self.intervention, self.intervention_seed = intervention, int(intervention_seed)
        # none and random match no state: no condition, transfer or place test applies
        matching = intervention in ("matched", "shuffled")
        self.use_conditions = use_conditions and matching
        n, size = len(self.records), _padded_size(len(self.records))
        self.matched_to = _derangement(n, self.intervention_seed) if intervention == "shuffled" \
            else np.arange(n)
        state_of = [self.records[j] for j in self.matched_to]  # whose decision state i stands at
        keys = np.zeros((size, embedding.DIM), np.float32)
        keys[:n] = embedding.embed_texts([r.situation for r in state_of])
        self._own_keys = keys[:n]  # the records' own situations except under "shuffled"
        reuse = np.zeros(size, np.float32)
        reuse[:n] = [r.reuse_utility for r in state_of]
        self._keys_t, self._reuse = _on_device(keys.T.copy(), reuse)
        self._size = size
        # task id -> reference group: what the records carry, overridden by the task pool's
        self.groups = {r.source_task_id: r.source_group or f"task:{r.source_task_id}"
                       for r in self.records}
        self.groups.update(groups or {})
        self._group_codes: dict[str, int] = {}
        self._key_group = np.array([self._code(self.groups[r.source_task_id])
                                    for r in self.records], np.int32)
        self._conditions = [r.condition.strip() for r in state_of]
        self._conditioned = [i for i, c in enumerate(self._conditions) if c]
        self.fits = fits if matching else None
        self._refuted = np.array([matching and r.transfer_failed for r in self.records], bool)
        self.stale = {r.record_id: why for r in self.records if world and (why := world(r))}
        self._stale = np.array([r.record_id in self.stale for r in self.records], bool)

    def with_checker(self, checker: cond_lib.CompositeChecker,
                     on_retrieve: Callable[[Sequence[TaskFacts], np.ndarray, list], None]
                     | None = None) -> "RetrievalIndex":
        """This index, its arrays shared, judging conditions with ``checker``;
        ``on_retrieve(tasks, query_embeddings, results)`` is told of every retrieval."""
        view = copy.copy(self)
        view.checker, view.on_retrieve = checker, on_retrieve
        return view

    def _code(self, group: str) -> int:
        return self._group_codes.setdefault(group, len(self._group_codes))

    def group_code(self, task_id: str, group: str = "") -> int:
        """The code of the reference group of task ``task_id`` (``group``: the one its context
        carries) among the records' groups; ``_NO_QUERY`` when no record shares it."""
        key = self.groups.get(task_id) or group or f"task:{task_id}"
        return self._group_codes.get(key, _NO_QUERY)

    def excluded(self, task_id: str, group: str = "") -> np.ndarray:
        """[N] bool: the records a decision of ``task_id`` never sees (its reference group's)."""
        return self._key_group == self.group_code(task_id, group)

    def visible_records(self, task_id: str, group: str = "") -> list[MemoryRecord]:
        """The records a decision of ``task_id`` may retrieve, conditions aside."""
        hidden = self.excluded(task_id, group) | self._stale
        return [r for r, h in zip(self.records, hidden) if not h]

    def reasons(self, tasks: Sequence[TaskFacts]) -> np.ndarray:
        """[Q, N] int8: why each record is not offered to each decision (``ELIGIBLE``: it is)."""
        query_group = np.array([self.group_code(t.task_id, t.group) for t in tasks], np.int32)
        out = np.where(self._key_group[None, :] == query_group[:, None], SAME_TASK,
                       ELIGIBLE).astype(np.int8)
        out[(out == ELIGIBLE) & self._stale[None, :]] = STALE
        for qi, task in enumerate(tasks if self.use_conditions else ()):
            verdicts: dict[str, bool] = {}
            for i in self._conditioned:
                if out[qi, i] == ELIGIBLE:
                    c = self._conditions[i]
                    if c not in verdicts:
                        verdicts[c] = self.checker.compatible(c, task)
                    if not verdicts[c]:
                        out[qi, i] = CONDITION
        out[(out == ELIGIBLE) & self._refuted[None, :]] = TRANSFER
        for qi, task in enumerate(tasks if self.fits is not None else ()):
            for i in np.flatnonzero(out[qi] == ELIGIBLE):
                if not self.fits(self.records[i], task):
                    out[qi, i] = NO_PLACE
        return out

    def retrieve(self, task: TaskFacts, state_text: str | None = None) -> RetrievalResult:
        """The top-k eligible records for one decision (Eq. 7-8); ``state_text`` defaults to the
        task's text."""
        return self.retrieve_batch([task], None if state_text is None else [state_text])[0]

    def retrieve_batch(self, tasks: Sequence[TaskFacts],
                       state_texts: Sequence[str] | None = None) -> list[RetrievalResult]:
        """Retrieves for many decisions at once; ``state_texts`` default to the tasks' text."""
        texts = [t.text for t in tasks] if state_texts is None else list(state_texts)
        return self.retrieve_embedded(tasks, embedding.embed_texts(texts))

    def retrieve_embedded(self, tasks: Sequence[TaskFacts],
                          query_embeddings: np.ndarray) -> list[RetrievalResult]:
        """``retrieve_batch`` on decision states already embedded (one row per task), under this
        index's intervention; results come back in the order of ``tasks``."""
        results = self._retrieve(tasks, query_embeddings)
        if self.on_retrieve is not None:
            self.on_retrieve(tasks, query_embeddings, results)
        return results

    def _retrieve(self, tasks: Sequence[TaskFacts],
                  query_embeddings: np.ndarray) -> list[RetrievalResult]:
        if not self.records or not tasks or self.intervention == "none":
            return [RetrievalResult(t.task_id, (), (), (), 0) for t in tasks]
        reasons = self.reasons(tasks)
        queries = np.asarray(query_embeddings, np.float32)
        if self.intervention == "random":
            return [self._result(t, row, self._random(t, q, row))
                    for t, q, row in zip(tasks, queries, reasons)]
        padded = np.full((len(tasks), self._size), PADDING, np.int8)
        padded[:, :len(self.records)] = reasons
        k = min(self.top_k, self._size)
        scores, idx, rel = row_blocks.in_blocks(
            lambda q, r: jax.device_get(topk_eligible(q, self._keys_t, self._reuse, r,
                                                      self.reuse_weight, k=k)),
            QUERY_ROWS, [queries, padded], [0.0, PADDING])
        return [self._result(task, reasons[qi], tuple(
            Candidate(self.records[j], float(s), float(r), rank)
            for rank, (s, j, r) in enumerate(zip(scores[qi], idx[qi], rel[qi])) if np.isfinite(s)))
            for qi, task in enumerate(tasks)]

    def _result(self, task: TaskFacts, row: np.ndarray,
                candidates: tuple[Candidate, ...]) -> RetrievalResult:
        """``candidates`` with what the decision's ``reasons`` row excluded, and why."""
        def ids(reason: int) -> tuple[str, ...]:
            return tuple(self.records[i].record_id for i in np.flatnonzero(row == reason))
        return RetrievalResult(task.task_id, candidates, ids(SAME_TASK), ids(CONDITION),
                               int((row == ELIGIBLE).sum()), ids(NO_PLACE), ids(TRANSFER),
                               ids(STALE))

    def _random(self, task: TaskFacts, query: np.ndarray,
                row: np.ndarray) -> tuple[Candidate, ...]:
        """k records drawn uniformly among the eligible, seeded by the intervention seed, the task
        id and the decision state (its query embedding); ranked by their score."""
        pool = np.flatnonzero(row == ELIGIBLE)
        digest = hashlib.sha256(f"{self.intervention_seed}/{task.task_id}/".encode()
                                + query.tobytes()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        drawn = rng.choice(pool, size=min(self.top_k, len(pool)), replace=False)
        rel = self._own_keys[drawn] @ query
        scores = rel + self.reuse_weight * np.array([self.records[j].reuse_utility for j in drawn])
        order = np.argsort(-scores, kind="stable")
        return tuple(Candidate(self.records[drawn[o]], float(scores[o]), float(rel[o]), rank)
                     for rank, o in enumerate(order))


def _derangement(n: int, seed: int) -> np.ndarray:
    """π with π(i) != i for n >= 2: a seeded random order, each element sent to its successor."""
    order = np.random.default_rng(seed).permutation(n)
    perm = np.empty(n, np.int64)
    perm[order] = np.roll(order, -1)
    return perm
