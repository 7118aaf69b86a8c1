"""Modules I and II during memory construction: propose local alternatives to a failed action,
verify them from the same state, and admit the verified improvements to the store (paper
§3.2–3.3, Appendix B.1, B.4). Read top down: ``CounterfactualBuilder.expand`` is the whole step.

``ConstructionConfig.corrections`` selects the component ablation of §6.1 (Appendix D.5):
``verified`` (the method), ``unverified_advice`` ("CF without WM": stored unchecked) and
``within_task`` ("WM without CF": checked, nothing stored, ``WithinTaskChecks``).
"""
import dataclasses
import datetime
import logging
import re

from countermem_jax.method.agents import Augmentation
from countermem_jax.method.locality import locality_problem
from countermem_jax.method.prompting import parsers, prompts
from countermem_jax.method.memory import CheckOutcome, Evidence, MemoryRecord, Provenance
from countermem_jax.method.memory.record import edit_text, make_record_id, normalize_condition
from countermem_jax.method import conditions
from countermem_jax.method.memory.world import stamp
from evaluators.base import Outcome, State
from evaluators.grouping import group_id

log = logging.getLogger(__name__)

# What the builder itself writes: the reason it refuses a record whose condition can never hold
# (``protocol/construction_tally.py`` counts it), and the feedback of an improvement that was
# never checked (the evidence of a "CF without WM" record, §6.1).
NEVER_HOLDS = "condition never holds"   # admission refused: the record could never be offered
UNCHECKED = "not checked: unverified advice (CF without WM)"


class CounterfactualBuilder:
    """Expands failed decisions of a construction task into checked, distilled, admitted records.

    ``agent`` supplies the backbone calls (``agent.llm``), the domain's rule edits and the
    evaluator H; ``store`` is the open ``MemoryStore`` that admission writes into; ``runlog``,
    when given, receives one "counterfactual" event per checked alternative (and per model edit
    screened out before its check), so every admission
    decision can be audited afterwards. Used only in the construction phase: selector training
    and evaluation never create records (§4.2).
    """
    def __init__(self, agent, store, cfg: "ConstructionConfig", runlog=None,
                 backbone_name: str = ""):
        self.agent, self.store, self.cfg, self.runlog = agent, store, cfg, runlog
        self.backbone_name = backbone_name or agent.backbone.model_name

    # The construction hooks of ``memory_use`` (``ConstructionHooks``).

    async def after_failure(self, ctx, state_before: State, action: str, outcome: Outcome):
        """Modules I–II on a failed action: the construction hooks of ``memory_use``."""
        await self.expand(ctx, state_before, action, outcome)

    def observe_reuse(self, record_id: str, label: int):
        """u <- (1-ρ)u + ρy for a record a decision used (Eq. 6), in the store admitted into."""
        return self.store.observe_reuse(record_id, label)

    async def expand(self, ctx, state_before: State, action: str, outcome: Outcome) -> list[dict]:
        """Runs Modules I and II for one failed decision; returns one log entry per checked alternative.

        ``state_before`` is the state s_t the failed ``action`` was taken from: every alternative is
        evaluated from it, so Δ (Eq. 2) compares the two actions from the same start. Returns []
        without any call when this task already expanded its share of failures, spent its
        verification budget or expanded this very action before; an alternative already checked
        in this task is not checked again. Tokens spent here are also booked to ``ctx.cf_tokens``.
        """
        if ctx.expanded_failures >= self.cfg.max_expanded_failures:
            return []
        if ctx.cf_checks >= self.cfg.verification_budget:
            return []
        if action.strip() in ctx.cf_expanded:   # the same action failed again: nothing new
            return []
        ctx.cf_expanded.add(action.strip())
        ctx.expanded_failures += 1
        tokens_before = ctx.tokens
        try:
            candidates, sources, screened = await self.propose(ctx, action, outcome)
            return await self._verify(ctx, state_before, action, outcome,
                                      candidates, sources, screened)
        finally:
            # Construction cost (Appendix B.4): the checks are in ctx.calls / ctx.failures, the
            # proposal and distillation tokens in ctx.tokens and, separately, in ctx.cf_tokens.
            ctx.cf_tokens += ctx.tokens - tokens_before

    async def propose(self, ctx, action: str,
                      outcome: Outcome) -> tuple[list[str], list[str], list[str]]:
        """Module I (Eq. 1): A_cf = G(s_t, a_t, o_t; K). LLM edits first, the domain's operators
        fill the free slots.

        Returns (candidates, sources, screened): at most K distinct candidates differing from
        ``action``, the label of each ("llm", "rule", or the operator family that made it),
        logged with its check, and the model's edits the domain screened out before any check.
        """
        parsed = await self.agent.llm(ctx, prompts.GENERATE_LOCAL_ALTERNATIVES, {
            **prompts.task_fields(ctx.task), "action": action, "feedback": outcome.feedback,
            "k": self.cfg.k, "unit": ctx.task.decision_unit},
            parse_args={"action": action, "k": self.cfg.k})
        llm_edits = []
        for edited in parsed.value or []:
            problem = locality_problem(action, edited)
            if problem:
                # counted with the template's parse failures: the reply broke the edit contract
                self.agent.failures.add(template=prompts.GENERATE_LOCAL_ALTERNATIVES.name,
                                        decision=ctx.charge().decision, attempt=0,
                                        error=f"edit not local: {problem}", reply=edited[:1000],
                                        kind="not_local")
                continue
            llm_edits.append(edited)
        domain = self.agent.domain
        chosen = (domain.ranked_edits(ctx.task, action, outcome, tuple(llm_edits), self.cfg.k)
                  if domain.ranked_edits else
                  [(e, "llm") for e in llm_edits] +
                  [(edit, "rule") for edit in domain.rule_edits(ctx.task, action)])
        candidates, sources = [], []
        for c, source in chosen:
            if c.strip() and c.strip() != action.strip() and c not in candidates:
                candidates.append(c)
                sources.append(source)
        # the model's edits the domain screened out on the task's own environment (an edit that
        # cannot run, or answers as the draft did) never reach the checker; each is logged
        screened = [e for e in llm_edits if e not in candidates]
        return candidates[: self.cfg.k], sources[: self.cfg.k], screened

    async def _verify(self, ctx, state_before: State, action: str, outcome: Outcome,
                      candidates: list[str], sources: list[str],
                      screened: list[str]) -> list[dict]:
        """Module II (Eq. 2): evaluates each alternative from ``state_before`` and distils and
        admits those with Δ > ε (``_distil_and_admit``).

        Every check is a world-model call and, if it fails, a failed attempt (Appendix D.6), charged
        to the task's context like any other evaluation.
        """
        for alt in screened:
            self._logged(ctx, action, {"candidate": alt, "source": "llm", "checked": False,
                                       "screened": True})
        if self.cfg.corrections == "unverified_advice":
            return await self._store_unverified(ctx, action, outcome, candidates[:1], sources)
        results = []
        for alt, source in zip(candidates, sources):
            if ctx.cf_checks >= self.cfg.verification_budget:
                break
            if alt.strip() in ctx.cf_checked:   # checked for an earlier failure of this task
                continue
            ctx.cf_checked.add(alt.strip())
            checked = await self.agent.check(state_before, alt)
            ctx.cf_checks += 1
            ctx.calls += checked.world_model_calls
            ctx.failures += checked.failed_attempt
            delta = checked.utility - outcome.utility
            entry = {"candidate": alt, "source": source,
                     "utility": checked.utility, "completed": checked.completed, "delta": delta}
            # A match with an empty reference result proves nothing (any empty answer matches).
            if checked.details.get("reference_empty"):
                entry["reference_empty"] = ctx.cf_reference_empty = True
            elif (checked.completed and delta > self.cfg.epsilon
                  and self.cfg.corrections == "verified"):
                entry.update(await self._distil_and_admit(ctx, action, outcome, alt, checked))
            results.append(self._logged(ctx, action, entry))
        return results

    def _logged(self, ctx, action: str, entry: dict) -> dict:
        if self.runlog:
            self.runlog.write("counterfactual", run=ctx.run, phase=ctx.phase,
                              task_id=ctx.task.task_id, decision=ctx.decision, original=action,
                              **entry)
        return entry

    async def _store_unverified(self, ctx, action: str, outcome: Outcome, candidates: list[str],
                                sources: list[str]) -> list[dict]:
        """CF without WM: the proposal goes to the store without any check (no world-model call);
        its evidence keeps the failed action's real check and marks the improvement unchecked."""
        results = []
        for alt, source in zip(candidates, sources):
            unchecked = Outcome(utility=outcome.utility, success=False, completed=False,
                                feedback=UNCHECKED, world_model_calls=0)
            entry = {"candidate": alt, "source": source, "checked": False}
            entry.update(await self._distil_and_admit(ctx, action, outcome, alt, unchecked))
            results.append(self._logged(ctx, action, entry))
        return results

    async def _distil_and_admit(self, ctx, original: str, o: Outcome, improved: str,
                                o2: Outcome) -> dict:
        """Distils a verified contrast into a record m = (q, a-, a+, e, c, u) and proposes it to the store.

        The backbone writes q and c (DISTIL_RECORD, Appendix D.8); u starts at 0. Returns the
        admission outcome for the construction log: admitted or not and why, S_adm, the record id,
        condition and situation, the ids evicted, and whether the distillation fell back.
        """
        parsed = await self.agent.llm(ctx, prompts.DISTIL_RECORD, {
            **prompts.task_fields(ctx.task), "original": original, "improved": improved,
            "evidence": f"original scored {o.utility:.2f} ({o.feedback}); " + (
                f"improved scored {o2.utility:.2f} ({o2.feedback})" if o2.completed
                else "the improved action was not checked"),
            "condition_hint": self.agent.domain.condition_hint})
        repeated = False
        # the condition the checked edit supports, as the domain reads its names: derived once,
        # used wherever the distilled one is missing, free text or never holds
        derived = conditions.derive(self.agent.domain.names, original, improved,
                                    ctx.task.environment, o.feedback)
        if parsed.ok:
            distilled, fallback = parsed.value, False
            if repeats_itself(distilled.situation):
                # a situation that says one thing three times is a degenerate reply, not
                # content: each sentence once, or the edit itself where a loop remains
                repeated = True
                distilled = parsers.DistilledRecord(
                    without_repeats(distilled.situation) or
                    f"the failed action needed this edit: {edit_text(original, improved)}",
                    distilled.condition)
        else:
            # A verified correction is not thrown away because a small model broke the format
            # twice: the edit itself becomes the situation, and the condition is derived from what
            # the edit changed (method/conditions; retrieval's memory.fallback_condition decides
            # whether it is checked or the record kept out). Logged as a fallback.
            distilled = parsers.DistilledRecord(
                f"the failed action needed this edit: {edit_text(original, improved)}",
                str(derived))
            fallback = True
        # q carries the source request too, so that retrieval can match later requests to it.
        situation = f"{distilled.situation} (source request: {ctx.task.prompt[:300]})"
        condition = normalize_condition(distilled.condition)
        if (self.cfg.scope_free_text_conditions and condition and ctx.task.environment
                and conditions.parse(condition).free_text):
            situation = f"{situation} [stated condition: {condition}]"
            condition = str(derived)
        if conditions.never_holds(condition):
            # A distilled condition no task can satisfy falls back to the one derived from the
            # edit; if that cannot hold either, the record could never be offered: not admitted.
            condition = str(derived)
        # an edit too large for the domain's parser bounds is read as text, a name no condition
        # text can hold is left out of its clause: the event says which
        unparsed = {key: value for key, value in (("condition_from_text", derived.refused),
                                                  ("condition_unlisted", list(derived.unlisted)))
                    if value}
        if conditions.never_holds(condition):
            return {"admitted": False, "reason": NEVER_HOLDS, "score": None, "record_id": "",
                    "condition": condition, "situation": situation, "evicted": [],
                    "distil_fallback": fallback, "situation_repeated": repeated, **unparsed}
        record = MemoryRecord(
            record_id=make_record_id(ctx.task.task_id, situation, original, improved, condition),
            source_task_id=ctx.task.task_id, source_group=group_id(ctx.task),
            situation=situation, original_action=original,
            improved_action=improved, evidence=Evidence(_check(o), _check(o2)),
            condition=condition,
            provenance=Provenance(domain=ctx.task.domain, benchmark=ctx.task.benchmark,
                                  backbone_model=self.backbone_name,
                                  evaluator=self.agent.evaluator.name,
                                  evaluator_version=self.agent.evaluator.version,
                                  created_at=datetime.datetime.now(datetime.timezone.utc)
                                  .isoformat(timespec="seconds"),
                                  snapshot_id=self.store.snapshot_id),
            verified_under=stamp(self.agent.evaluator, ctx.task))   # checker and data now
        decision, evicted = (self.store.propose(record) if self.cfg.corrections == "verified"
                             else self.store.insert_unverified(record))
        return {"admitted": decision.admitted, "reason": decision.reason,
                "score": decision.score, "record_id": record.record_id, "condition": condition,
                "situation": situation, "evicted": evicted, "distil_fallback": fallback,
                "situation_repeated": repeated, **unparsed}


class WithinTaskChecks(Augmentation):
    """"WM without CF" (§6.1), at evaluation test-time checks against the reference: after a
    failed action, Modules I–II check up to K alternatives from the same state against the
    task's own reference (world-model calls of this task, outside its attempt budget), nothing
    is stored, and the best verified alternative (largest Δ > ε; a pass against an empty
    reference result refused, as construction refuses it) replaces the next draft of the same
    task; it is forgotten when the task ends. An oracle search, not a memory: its rows are
    reported apart from memory's, with their checker calls. Wraps an evaluation run's
    augmentation (during construction the builder checks the same alternatives and stores
    nothing)."""

    def __init__(self, inner: Augmentation, builder: CounterfactualBuilder):
        if builder.cfg.corrections != "within_task":
            raise ValueError("WithinTaskChecks needs construction.corrections = 'within_task'")
        self.inner, self.builder = inner, builder
        self.name = inner.name
        self._next: dict[str, str] = {}

    async def decide(self, ctx, draft: str):
        """The inner augmentation's decision, its action replaced by this task's pending
        verified alternative if there is one (used once)."""
        info = await self.inner.decide(ctx, draft)
        corrected = self._next.pop(ctx.task.task_id, None)
        if corrected is not None:
            info.action = corrected
            info.log["within_task_correction"] = True
        return info

    async def observe(self, ctx, draft, info, outcome, previous_utility) -> dict:
        """The inner augmentation's observation, unchanged."""
        return await self.inner.observe(ctx, draft, info, outcome, previous_utility)

    async def after_failure(self, ctx, state_before, action, outcome) -> None:
        """Checks alternatives to the failed action from ``state_before`` (Modules I-II) and
        keeps the best one with Δ > ε (Eq. 2) for this task's next decision; nothing is stored."""
        await self.inner.after_failure(ctx, state_before, action, outcome)
        checked = await self.builder.expand(ctx, state_before, action, outcome)
        # a pass against an empty reference result proves nothing: refused, as construction does
        better = [e for e in checked if e["completed"] and not e.get("reference_empty")
                  and e["delta"] > self.builder.cfg.epsilon]
        if better:
            self._next[ctx.task.task_id] = max(better, key=lambda e: e["delta"])["candidate"]

    async def end_task(self, ctx) -> None:
        """Forgets the task's pending alternative, so no later task can use it."""
        self._next.pop(ctx.task.task_id, None)
        await self.inner.end_task(ctx)


CORRECTION_MODES = ("verified", "unverified_advice", "within_task")


@dataclasses.dataclass(frozen=True)
class ConstructionConfig:
    """Budgets and thresholds of Modules I–II during memory construction, from the config's
    ``construction`` section (the paper's values are stated there, Appendix B.4).

    ``k`` is K, the most alternatives proposed for one failed action; ``max_expanded_failures``
    caps how many failed decisions of one task are expanded; ``verification_budget`` is the
    construction checking allowance per task, kept apart from the agent's ordinary solving budget
    but counted in interaction totals; ``epsilon`` is ε_adm, the raw-gain floor a checked
    alternative must exceed before it is distilled at all. ``reuse_policy`` and
    ``relevance_threshold`` name the fixed selector that reuses records while the store grows
    (``selector.policies.make_fixed``).
    """
    k: int
    max_expanded_failures: int
    verification_budget: int        # counterfactual checks per task
    epsilon: float
    reuse_policy: str
    relevance_threshold: float
    # For backbones too weak to judge free-text conditions: a condition outside the rule grammar
    # is replaced by the condition derived from the verified edit (as for a failed distillation)
    # and its text moves into the situation.
    scope_free_text_conditions: bool
    corrections: str                 # "verified" | "unverified_advice" | "within_task" (§6.1)
    # After the last task, each record's edit is replayed on at most this many other
    # construction tasks' failed actions of its database and checked (transfer_checks.py;
    # 0 = off, the paper's method).
    transfer_checks: int

    def __post_init__(self):
        if self.corrections not in CORRECTION_MODES:
            raise ValueError(f"unknown construction.corrections {self.corrections!r}; expected "
                             f"one of {CORRECTION_MODES}")


# Helpers of the admission step: the stored form of a check, and distilled situations that
# repeat themselves (a degenerate reply of a small backbone, replaced before storage).

def _check(o: Outcome) -> CheckOutcome:
    """A world-model ``Outcome`` as stored evidence, its feedback clipped like a prompt field."""
    return CheckOutcome(o.utility, o.success, o.completed, prompts.clip(o.feedback, "feedback"))


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_LOOP_WORDS = 6   # a run of this many words met twice in one situation is a loop


def repeats_itself(text: str) -> bool:
    """Whether a distilled situation says something twice: a sentence written again (the 0.5B
    repeats one sentence three times) or the same run of ``_LOOP_WORDS`` words twice (a greedy
    loop inside one sentence). Compared without case, spacing or punctuation."""
    seen = [w for w in map(_words, _sentences(text)) if w]
    if len(set(seen)) < len(seen):
        return True
    words = _words(text).split()
    runs = [tuple(words[i:i + _LOOP_WORDS]) for i in range(len(words) - _LOOP_WORDS + 1)]
    return len(set(runs)) < len(runs)


def without_repeats(text: str) -> str:
    """``text`` with each sentence kept once, in order; "" when a loop remains inside a
    sentence (then the caller uses the situation derived from the edit)."""
    kept, seen = [], set()
    for s in _sentences(text):
        key = _words(s)
        if key and key not in seen:
            seen.add(key)
            kept.append(s)
    out = " ".join(kept)
    return "" if repeats_itself(out) else out


def _sentences(text: str) -> list[str]:
    return [p.strip() for p in _SENTENCE_END.split(text) if p.strip()]


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))
