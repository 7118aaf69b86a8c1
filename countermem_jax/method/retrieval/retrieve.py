"""Top-k retrieval over eligible records (Appendix B.4, Eq. 7 and 8).

r_i(s) = cos(φ(s), φ(q_i)) + λ_reuse·u_i over records whose source task is not in the current
task's reference group and whose condition holds, top k = 3. Eq. 7 excludes the task's own
records; the index excludes its whole reference group (``evaluators.grouping``: Spider's
paraphrase twins share one gold query), in every phase, because a twin's verified record carries
the task's own reference answer as its corrected action (in Spider, construction task
``car_1/161`` and training task ``car_1/162`` are such twins). A record's group is the task pool's
group of its source task (``groups``, task id -> group id, what the phases pass from their
splits), else the group the record carries (``MemoryRecord.source_group``), else its source task
alone; a decision's group is the pool's group of its task, else the group of the records that
task wrote, else the group its ``TaskFacts`` carries (``memory_use.condition_query`` sets it),
so a task's own records are always excluded. The scoring and top-k run in one jitted function,
batched over queries; the store's embeddings are copied to an accelerator once per index (on
the CPU backend they stay host arrays). Queries are scored in blocks of exactly ``QUERY_ROWS``
rows (``row_blocks``), so that a query's scores are the same bit for bit whatever other queries
share its batch: retrieving the decisions in flight together gives the one-at-a-time result
(``retrieval/batching.py``).

``intervention`` changes which records reach the selector (§6.2, Appendix D.5 retrieval
ablation), deterministically given ``intervention_seed``; the records of the current task's
reference group stay excluded under every intervention:
  matched   the default: situation similarity, reuse and the applicability condition;
  none      no record is ever returned (the LLM receives no memory);
  random    k records sampled uniformly among the other groups' records, with no state matching
            (neither similarity nor condition); the sample depends on the seed, the task and the
            decision state only;
  shuffled  every record is reassigned to another record's decision state: matching runs on the
            situation, condition and reuse of record π(i) and returns record i, π a seeded
            derangement (a record keeps its own state only in a store of one record).

Two more tests keep a record out where it could not act (matched and shuffled only):
  fits      (``memory.revision=replay``) the revision's own test on the decision's draft: a
            record whose checked edit has no place in it (``edit_replay.record_fits``) would
            leave the draft as it is, so it is not offered; listed as ``excluded_no_place``;
  transfer  a record whose every transfer try failed (``MemoryRecord.transfer_failed``: its
            edit, replayed on other construction tasks' failed drafts of its database, never
            passed the checker) is never offered; listed as ``excluded_transfer``.
And one under every intervention: a stale record (``world``, ``method/memory/world.py``: its
checker version or environment changed since its evidence was checked) is never offered, nor
its condition judged; listed as ``excluded_stale``.
"""
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
from countermem_jax.method.retrieval import conditions as cond_lib
from countermem_jax.method import text_embedding as embedding

REUSE_WEIGHT = 0.2
TOP_K = 3
QUERY_ROWS = 16
SCORED_BLOCKS = 1024
_NO_GROUP = -1
_NO_QUERY = -2  # a group code no record has
INTERVENTIONS = ("matched", "none", "random", "shuffled")


@functools.partial(jax.jit, static_argnames=("k",))
def topk_eligible(queries: jax.Array, keys_t: jax.Array, reuse: jax.Array, key_group: jax.Array,
                  query_group: jax.Array, condition_ok: jax.Array | None, reuse_weight: float,
                  k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Scores [Q, k], record indices [Q, k] and their cosine relevance [Q, k].

    ``keys_t`` is the record embedding matrix stored transposed, [D, N], so that the product needs
    no transpose copy per call. ``key_group`` / ``query_group`` are the codes of the records'
    and the decisions' reference groups: a record of the decision's group is ineligible.
    Ineligible slots score -inf; ``key_group`` is -1 for padding rows, which are never eligible.
    """
    chex.assert_rank([queries, keys_t, reuse, key_group, query_group], [2, 2, 1, 1, 1])
    chex.assert_type([key_group, query_group], [jnp.int32, jnp.int32])
    chex.assert_equal(queries.shape[1], keys_t.shape[0])
    sims = queries @ keys_t
    eligible = ((key_group[None, :] != query_group[:, None])
                & (key_group[None, :] != _NO_GROUP))
    if condition_ok is not None:
        eligible &= condition_ok
    scores = jnp.where(eligible, sims + reuse_weight * reuse[None, :], -jnp.inf)
    top_scores, top_idx = jax.lax.top_k(scores, k)
    return top_scores, top_idx, jnp.take_along_axis(sims, top_idx, axis=1)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One retrieved record with its Eq. 7 score (relevance plus weighted reuse), its cosine
    relevance alone, and its 0-based rank among the top k."""
    record: MemoryRecord
    score: float
    relevance: float
    rank: int


@dataclasses.dataclass(frozen=True)
class RetrievalResult:
    """The ranked candidates and, for coverage studies, what was excluded and why
    (``excluded_same_task``: the records of the task's reference group, its own among them)."""
    task_id: str
    candidates: tuple[Candidate, ...]
    excluded_same_task: tuple[str, ...]
    excluded_condition: tuple[str, ...]
    eligible_count: int
    excluded_no_place: tuple[str, ...] = ()   # condition held, the revision has no place
    excluded_transfer: tuple[str, ...] = ()   # every transfer try of the record failed
    excluded_stale: tuple[str, ...] = ()      # checked in a world that has changed since

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
    ``world`` says why a record is stale ("" when not: ``world.WorldCheck``), read once here."""

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
        self.intervention, self.intervention_seed = intervention, int(intervention_seed)
        # none and random match no state, so no condition is judged for them
        self.use_conditions = use_conditions and intervention in ("matched", "shuffled")
        n, size = len(self.records), _padded_size(len(self.records))
        self.matched_to = _derangement(n, self.intervention_seed) if intervention == "shuffled" \
            else np.arange(n)
        state_of = [self.records[j] for j in self.matched_to]  # whose decision state i stands at
        keys = np.zeros((size, embedding.DIM), np.float32)
        keys[:n] = embedding.embed_texts([r.situation for r in state_of])
        self._own_keys = keys[:n]  # the records' own situations except under "shuffled"
        reuse = np.zeros(size, np.float32)
        reuse[:n] = [r.reuse_utility for r in state_of]
        # task id -> reference group: what the records carry, overridden by the task pool's
        self.groups = {r.source_task_id: r.source_group or f"task:{r.source_task_id}"
                       for r in self.records}
        self.groups.update(groups or {})
        self._group_codes: dict[str, int] = {}
        key_group = np.full(size, _NO_GROUP, np.int32)
        key_group[:n] = [self._code(self.groups[r.source_task_id]) for r in self.records]
        self._key_group_np = key_group[:n]
        self._keys_t, self._reuse, self._key_group = _on_device(keys.T.copy(), reuse, key_group)
        self._scored: dict[bytes, tuple] = {}  # query blocks scored so far (``_score_block``)
        self._size = size
        self._conditions = [r.condition.strip() for r in state_of]
        self._conditioned = [i for i, c in enumerate(self._conditions) if c]
        # the revision's place test (None: every record can act) and the transfer evidence
        self.fits = fits if intervention in ("matched", "shuffled") else None
        self._transfer_ok = np.array([not r.transfer_failed for r in self.records], bool)
        self.stale = {r.record_id: why for r in self.records if world and (why := world(r))}
        self._stale = np.array([r.record_id in self.stale for r in self.records], bool)

    def _code(self, group: str) -> int:
        return self._group_codes.setdefault(group, len(self._group_codes))

    def group_code(self, task_id: str, group: str = "") -> int:
        """The code of the reference group of task ``task_id`` (``group``: the one its context
        carries) among the records' groups; ``_NO_QUERY`` when no record shares it."""
        key = self.groups.get(task_id) or group or f"task:{task_id}"
        return self._group_codes.get(key, _NO_QUERY)

    def excluded(self, task_id: str, group: str = "") -> np.ndarray:
        """[N] bool: the records a decision of ``task_id`` never sees (its reference group's)."""
        return self._key_group_np == self.group_code(task_id, group)

    def visible_records(self, task_id: str, group: str = "") -> list[MemoryRecord]:
        """The records a decision of ``task_id`` may retrieve, conditions aside."""
        hidden = self.excluded(task_id, group) | self._stale
        return [r for r, h in zip(self.records, hidden) if not h]

    def _condition_mask(self, tasks: Sequence[TaskFacts]) -> np.ndarray | None:
        if not self.use_conditions or not self._conditioned:
            return None
        mask = np.ones((len(tasks), self._size), dtype=bool)
        for qi, task in enumerate(tasks):
            verdicts: dict[str, bool] = {}
            own = self.group_code(task.task_id, task.group)
            for i in self._conditioned:
                if self._key_group_np[i] == own or self._stale[i]:  # excluded, never checked
                    continue
                c = self._conditions[i]
                if c not in verdicts:
                    verdicts[c] = self.checker.compatible(c, task)
                mask[qi, i] = verdicts[c]
        return mask

    def _action_mask(self, tasks: Sequence[TaskFacts],
                     cond_mask: np.ndarray | None) -> np.ndarray | None:
        """[Q, size]: records that can act on each decision: transfer not refuted, and (with
        ``fits``) a place for the revision in the decision's draft, tested only for records
        the other tests leave eligible; None when nothing restricts."""
        if self.fits is None and self._transfer_ok.all() and not self._stale.any():
            return None
        n = len(self.records)
        mask = np.ones((len(tasks), self._size), dtype=bool)
        mask[:, :n] &= (self._transfer_ok & ~self._stale)[None, :]
        if self.fits is not None:
            for qi, task in enumerate(tasks):
                own = self.group_code(task.task_id, task.group)
                for i in range(n):
                    if (mask[qi, i] and self._key_group_np[i] != own
                            and (cond_mask is None or cond_mask[qi, i])):
                        mask[qi, i] = self.fits(self.records[i], task)
        return mask

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
        if not self.records or not tasks or self.intervention == "none":
            return [RetrievalResult(t.task_id, (), (), (), 0) for t in tasks]
        if self.intervention == "random":
            return [self._random(t, q) for t, q in zip(tasks, np.asarray(query_embeddings))]
        query_group = np.array([self.group_code(t.task_id, t.group) for t in tasks], np.int32)
        cond_mask = self._condition_mask(tasks)
        act_mask = self._action_mask(tasks, cond_mask)
        ok_mask = (cond_mask if act_mask is None else act_mask if cond_mask is None
                   else cond_mask & act_mask)
        k = min(self.top_k, self._size)
        scores, idx, rel = row_blocks.in_blocks(
            functools.partial(self._score_block, k=k), QUERY_ROWS,
            [np.asarray(query_embeddings, np.float32), query_group, ok_mask],
            [0.0, _NO_QUERY, True])
        results = []
        n = len(self.records)
        for qi, task in enumerate(tasks):
            same = self._key_group_np == query_group[qi]
            stale = self._stale & ~same
            cond_false = (~cond_mask[qi, :n] & ~same if cond_mask is not None
                          else np.zeros(n, bool))
            refuted = ~self._transfer_ok & ~same & ~cond_false & ~stale
            no_place = (~act_mask[qi, :n] & ~same & ~cond_false & ~refuted & ~stale
                        if act_mask is not None else np.zeros(n, bool))
            candidates = tuple(
                Candidate(self.records[j], float(s), float(r), rank)
                for rank, (s, j, r) in enumerate(zip(scores[qi], idx[qi], rel[qi]))
                if np.isfinite(s))
            results.append(RetrievalResult(
                task.task_id, candidates,
                tuple(self.records[i].record_id for i in np.flatnonzero(same)),
                tuple(self.records[i].record_id for i in np.flatnonzero(cond_false)),
                int(n - same.sum() - cond_false.sum() - refuted.sum() - no_place.sum()
                    - stale.sum()),
                tuple(self.records[i].record_id for i in np.flatnonzero(no_place)),
                tuple(self.records[i].record_id for i in np.flatnonzero(refuted)),
                tuple(self.records[i].record_id for i in np.flatnonzero(stale))))
        return results

    def _score_block(self, queries: np.ndarray, query_group: np.ndarray,
                     condition_ok: np.ndarray | None, *, k: int) -> tuple:
        """``topk_eligible`` on one block of ``QUERY_ROWS`` queries, remembered by the block's
        content (its digest): replaying a construction task's retrievals, or running it again in
        a wave, asks the same index the same question (at most ``SCORED_BLOCKS`` kept)."""
        digest = hashlib.blake2b(queries.tobytes(), digest_size=16)
        digest.update(query_group.tobytes())
        digest.update(b"-" if condition_ok is None else condition_ok.tobytes())
        key = digest.digest()
        scored = self._scored.get(key)
        if scored is None:
            scored = jax.device_get(topk_eligible(queries, self._keys_t, self._reuse,
                                                  self._key_group, query_group, condition_ok,
                                                  self.reuse_weight, k))
            if len(self._scored) >= SCORED_BLOCKS:
                del self._scored[next(iter(self._scored))]
            self._scored[key] = scored
        return scored

    def _random(self, task: TaskFacts, query: np.ndarray) -> RetrievalResult:
        """k records drawn uniformly among the other groups' records, seeded by the intervention
        seed, the task id and the decision state (its query embedding); ranked by their score."""
        own = self.excluded(task.task_id, task.group)
        pool = np.flatnonzero(~own & ~self._stale)
        digest = hashlib.sha256(f"{self.intervention_seed}/{task.task_id}/".encode()
                                + np.asarray(query, np.float32).tobytes()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        drawn = rng.choice(pool, size=min(self.top_k, len(pool)), replace=False)
        rel = self._own_keys[drawn] @ np.asarray(query, np.float32)
        scores = rel + self.reuse_weight * np.array([self.records[j].reuse_utility for j in drawn])
        order = np.argsort(-scores, kind="stable")
        candidates = tuple(Candidate(self.records[drawn[o]], float(scores[o]), float(rel[o]), rank)
                           for rank, o in enumerate(order))
        return RetrievalResult(task.task_id, candidates,
                               tuple(self.records[i].record_id for i in np.flatnonzero(own)), (),
                               int(len(pool)), excluded_stale=tuple(
                                   self.records[i].record_id
                                   for i in np.flatnonzero(self._stale & ~own)))


def _derangement(n: int, seed: int) -> np.ndarray:
    """π with π(i) != i for n >= 2: a seeded random order, each element sent to its successor."""
    order = np.random.default_rng(seed).permutation(n)
    perm = np.empty(n, np.int64)
    perm[order] = np.roll(order, -1)
    return perm
