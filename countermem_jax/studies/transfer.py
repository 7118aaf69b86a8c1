"""Study 6, transfer (paper §5.3, Appendix D.4, Table 5, Figure 3): does a correction learned on a
source task help, or hurt, a target task under four changes — CounterMem and ReasoningBank, each
target run with only its source's memory, beside the same target without memory.
"""
import asyncio
import dataclasses
import json

import numpy as np

from countermem_jax import baselines
from countermem_jax.method import bounded_diff
from countermem_jax.method.agents import Agent, AgentConfig, Augmentation, MemoryCalls
from countermem_jax.method.prompting import prompts
from countermem_jax.method.prompting.failures import ParseFailureLog
from countermem_jax.backbones.base import Charge
from countermem_jax.experiment import METHOD_LABELS, Workdir
from countermem_jax.method.memory_use import CounterMemAugmentation
from countermem_jax.phases import context
from countermem_jax.method.conditions import TaskFacts
from countermem_jax.method.conditions.checkers import RuleChecker
from countermem_jax.method.selector import policies
from countermem_jax.studies import cells

TITLE = "Reusing memory under four changes to the task"
PAPER = "§5.3, Appendix D.4 (Figure 3)"
CONDITIONS = {"same_environment": "same env., new task", "new_environment": "new env., new task",
              "new_surface": "same error, new surface",
              "look_alike": "look-alike, changed condition"}
NO_MEMORY = "no memory"


# ----------------------------------------------------------------------------- applicability
def applies(checker: RuleChecker, condition: str, task) -> bool | None:
    """The rule checker's verdict on ``condition`` for ``task`` (None: it cannot decide)."""
    return checker.check(condition, TaskFacts(task.task_id, task.prompt, {
        "environment": task.environment, **task.features}))


def _edit(original: str, improved: str) -> tuple[list, list] | None:
    """The record's edit as (original tokens, improved tokens): the one differing token run,
    widened by a token on each side when one side is empty (so it has an anchor)."""
    a, b = original.split(), improved.split()
    diff = bounded_diff.opcodes(a, b)   # bounded cost: a stored action may be long
    ops = diff.changes
    if len(ops) != 1 or not diff.exact:
        return None
    _, i1, i2, j1, j2 = ops[0]
    if i1 == i2 or j1 == j2:
        i1, j1 = max(i1 - 1, 0), max(j1 - 1, 0)
        i2, j2 = min(i2 + 1, len(a)), min(j2 + 1, len(b))
    return a[i1:i2], b[j1:j2]


def undo_edit(gold: str, original: str, improved: str) -> str | None:
    """``gold`` with the record's edit (original → improved) undone at its one occurrence of the
    improved tokens; None if the edit is not a single span or occurs other than once."""
    edit = _edit(original, improved)
    if edit is None or not edit[1]:
        return None
    old, new = edit
    tokens = gold.split()
    hits = [i for i in range(len(tokens) - len(new) + 1)
            if [t.lower() for t in tokens[i:i + len(new)]] == [t.lower() for t in new]]
    if len(hits) != 1:
        return None
    i = hits[0]
    return " ".join(tokens[:i] + old + tokens[i + len(new):])


def _checks(evaluator, task, action: str) -> bool:
    """``action`` completes and succeeds on ``task`` from its initial state (one checker call)."""
    outcome = evaluator.evaluate(evaluator.reset(task), action)
    return bool(outcome.completed and outcome.success)


async def look_alike(backbone, evaluator, checker, source, record,
                     failures: ParseFailureLog) -> tuple[object, str]:
    """(target task or None, why it was dropped) for one source record."""
    parsed = await prompts.call_template(
        backbone, prompts.LOOK_ALIKE_TASK, {"task": source.prompt, "condition": record.condition},
        charge=Charge("other", f"transfer/look_alike/{source.task_id}/{record.record_id}"),
        failures=failures)
    if not parsed.ok:
        return None, "generator broke its contract"
    request = parsed.value.strip()
    # Only SQL has a reference derivable from the source's (gold query with the edit undone).
    if source.domain != "sql" or not hasattr(source.reference, "gold_sql"):
        return None, f"no reference derivation for domain {source.domain}"
    from countermem_jax.domains.sql import question_features
    features = {k: v for k, v in source.features.items()}
    features.update(question_features(request))
    gold = undo_edit(source.reference.gold_sql, record.original_action, record.improved_action)
    if gold is None:
        return None, "the record's edit does not apply once to the source's gold query"
    target = dataclasses.replace(
        source, task_id=f"{source.task_id}~lookalike~{record.record_id[:8]}", prompt=request,
        features=features, reference=dataclasses.replace(source.reference, gold_sql=gold))
    # Kept only if the condition is confirmed FALSE and the derived gold separates the two
    # requests: it passes, and the source's (corrected) gold does not.
    if applies(checker, record.condition, target) is not False:
        return None, "the applicability check does not confirm the condition is false"
    if not _checks(evaluator, target, gold):
        return None, "the derived gold query does not pass the checker"
    if _checks(evaluator, target, source.reference.gold_sql):
        return None, "the source's correction is not wrong on the look-alike request"
    return target, ""


# ----------------------------------------------------------------------------- pairs
def draw_pairs(candidates: list, n_pairs: int, seed: int) -> list:
    """Up to ``n_pairs`` (source, target) pairs from the candidates, seeded, each target once."""
    order = np.random.default_rng(seed).permutation(len(candidates))
    pairs, used = [], set()
    for i in order:
        source, target = candidates[i]
        if target.task_id not in used:
            pairs.append((source, target))
            used.add(target.task_id)
        if len(pairs) == n_pairs:
            break
    return sorted(pairs, key=lambda p: p[1].task_id)


class _SourceView:
    """A frozen baseline memory seen through one source task: only its items are offered
    (verification still covers the whole frozen memory)."""

    def __init__(self, memory, source_id: str):
        self._memory, self.frozen, self.method = memory, memory.frozen, memory.method
        self.items = [i for i in memory.items if source_id in i.get("source_task_ids", [])]

    def verify(self):
        """The whole frozen memory's integrity check, not only this source's items."""
        return self._memory.verify()


class _PerTarget(Augmentation):
    """Each target task run with its own pair's augmentation."""

    def __init__(self, by_task: dict):
        self.by_task = by_task

    async def decide(self, ctx, draft):
        return await self.by_task[ctx.task.task_id].decide(ctx, draft)

    async def observe(self, ctx, draft, info, outcome, previous_utility):
        return await self.by_task[ctx.task.task_id].observe(ctx, draft, info, outcome,
                                                            previous_utility)

    async def after_failure(self, ctx, state_before, action, outcome):
        await self.by_task[ctx.task.task_id].after_failure(ctx, state_before, action, outcome)

    async def end_task(self, ctx):
        await self.by_task[ctx.task.task_id].end_task(ctx)


def _selector(cfg, cell):
    """The evaluation's selector: a fixed policy when configured, else the trained DQN of the
    first evaluation seed restored from the CounterMem cell (Appendix C.3)."""
    if cfg.eval.selector != "dqn":
        return policies.make_fixed(cfg.eval.selector, cfg.eval.relevance_threshold)
    seed = int((cfg.eval.seeds or cfg.selector.seeds)[0])
    return Workdir(cell).restore_seed(seed)[0]


def run(cfg, workdir, *, backbone=None, benchmark=None) -> dict:
    """Runs the transfer study into ``workdir`` and returns its ``study.json`` record.

    Builds memory and trains the selector per method (ordinary phases, one cell each), draws
    the source-target pairs of the four conditions, runs every target once without memory and
    once per method with only its source's memory, and records success, coverage and harmful
    use per condition (rows schema; panels a-c of Figure 3). ``backbone`` / ``benchmark``
    replace the configured ones (tests, the scripted model).
    """
    s, run_cfg = cfg.protocol, cfg.base
    st = cells.Study(cfg, workdir, backbone, benchmark)
    tasks, evaluator, domain = st.benchmark_for(run_cfg)
    sp = context.draw_splits(run_cfg, tasks)
    manifest = {p: cells.ids(getattr(sp, p)) for p in ("build", "train", "validation", "eval")}
    # 1. Memory and selector per method, on the shared split (resumable cells).
    built = {}
    for method in s.methods:
        cell = st.cell(method)
        pcfg = cells.phase_config(run_cfg, method=method,
                                  **{"splits.manifest": st.manifest(cell, **manifest)})
        st.run_phases(pcfg, cell, evaluate=False)
        built[method] = (pcfg, cell)
    if "countermem" not in built:
        raise cells.StudyError("protocol.methods must include countermem: its records define the "
                               "sources and the look-alike targets")
    # 2. Sources: build tasks with at least one verified CounterMem record.
    frozen = Workdir(built["countermem"][1]).load_frozen_checked()
    by_source = {}
    for r in frozen.records:
        by_source.setdefault(r.source_task_id, []).append(r)
    by_id = {t.task_id: t for t in tasks}
    sources = [by_id[i] for i in manifest["build"] if i in by_source]
    # 3. Candidate pairs per condition (Table 5); targets come from the held-out split only.
    checker = RuleChecker(run_cfg.memory.fallback_condition)
    held_out = list(sp.eval)
    candidates = {
        "same_environment": [(src, t) for src in sources for t in held_out
                             if t.environment == src.environment],
        "new_environment": [(src, t) for src in sources for t in held_out
                            if t.environment != src.environment],
        "new_surface": [(src, t) for src in sources for t in held_out
                        if t.environment != src.environment and any(
                            applies(checker, r.condition, t) is True for r in by_source[
                                src.task_id])]}
    dropped = {}  # why a look-alike target was not kept -> how many times

    async def generate():
        """Look-alike candidates, one per source record that yields a valid target."""
        out = []
        failures = ParseFailureLog(st.root / "parse_failures.jsonl")  # the generator's contract
        for src in sources:
            for record in by_source[src.task_id]:
                target, why = await look_alike(st.backbone, evaluator, checker, src, record,
                                               failures)
                if target is None:
                    dropped[why] = dropped.get(why, 0) + 1
                else:
                    out.append((src, target))
        return out
    candidates["look_alike"] = asyncio.run(generate())
    # A different seed per condition, so the conditions' draws are independent.
    pairs = {c: draw_pairs(candidates[c], int(s.n_pairs), int(s.pair_seed) + i)
             for i, c in enumerate(CONDITIONS)}
    pairs_wd = Workdir(st.cell("pairs"))
    # pairs.json: per condition, [source id, target id, target request] (look-alikes are new).
    (pairs_wd.root / "pairs.json").write_text(json.dumps(
        {c: [[src.task_id, t.task_id, t.prompt] for src, t in p] for c, p in pairs.items()},
        indent=1))
    agent_cfg = AgentConfig(**run_cfg.agent.to_dict())

    def augmentation(method, agent, source):
        """``method``'s memory restricted to ``source``'s records (CounterMem: a retrieval
        index over them; a baseline: a view offering only its items)."""
        pcfg, cell = built[method]
        if method == "countermem":
            settings = context.method_config(pcfg)
            index = context.retrieval_index(settings, by_source[source.task_id],
                                            context.condition_checker(settings),
                                            groups=sp.groups, names=agent.domain.names)
            return CounterMemAugmentation(MemoryCalls(agent), index_source=lambda: index,
                                          selector=selectors["countermem"],
                                          render_condition=settings.use.render_condition,
                                          revision=settings.use.revision)
        aug = baselines.make_baseline_augmentation(method, pcfg, agent, cell, sp.groups)
        aug.memory = _SourceView(aug.memory, source.task_id)
        return aug
    selectors = {"countermem": _selector(*built["countermem"])}

    async def run_pairs():
        """4. Every pair's target, per condition and method (None: no memory), skipping the
        targets a previous, killed run already finished."""
        try:
            for condition, chosen in pairs.items():
                for method in (None, *s.methods):
                    name = f"{condition}-{method or 'base'}"
                    agent = Agent(st.backbone, evaluator, domain, agent_cfg,
                                  pairs_wd.run_log(name))
                    done = agent.runlog.finished(name)
                    aug = _PerTarget({t.task_id: augmentation(method, agent, src) if method
                                      else Augmentation() for src, t in chosen})
                    for _, target in chosen:
                        if target.task_id not in done:
                            await agent.run(target, aug, phase="evaluation", run=name)
        finally:
            await st.backbone.aclose()
    asyncio.run(run_pairs())
    # 5. Rows: (a) success over targets, (b) coverage per retrieval opportunity, (c) harmful
    # use per selected use (Appendix D.4); the no-memory reference only has (a).
    rows = []
    for condition, chosen in pairs.items():
        x = CONDITIONS[condition]
        ids = [t.task_id for _, t in chosen]
        for method in (None, *s.methods):
            name = f"{condition}-{method or 'base'}"
            label = METHOD_LABELS.get(method, method) if method else NO_MEMORY
            ends = cells.task_ends(pairs_wd.root, name)
            rows.append(cells.row("a", "task success", "success", "success (%)", label, x,
                                  [cells.solved_row(ends, ids)] if ids else [[]], ["pairs"],
                                  "tasks", ids))
            if method is None:
                continue
            units = cells.rate_units(cells.decisions(pairs_wd.root, name),
                                     cells.decisions(pairs_wd.root, f"{condition}-base"))
            rows.append(cells.row("b", "retrieval coverage", "coverage",
                                  "coverage per retrieval opportunity (%)", label, x,
                                  [units["coverage"]], ["pairs"], "retrieval opportunities"))
            rows.append(cells.row("c", "harmful use", "harmful_use",
                                  "harmful use per paired use (%)", label, x,
                                  [units["harmful"]], ["pairs"], "selected uses"))
    notes = [f"{len(sources)} source tasks with verified records; pairs per condition: " +
             ", ".join(f"{c} {len(p)} of {len(candidates[c])} candidates"
                       for c, p in pairs.items())]
    if dropped:
        notes.append("look-alike targets dropped: " + "; ".join(
            f"{why}: {n}" for why, n in sorted(dropped.items())))
    # The notes say how many pairs each condition had to draw from, and why look-alikes were lost.
    record = st.write(title=TITLE, paper=PAPER, rows=rows, manifest=manifest, notes=notes)
    for note in notes:
        print(f"transfer: {note}")
    for r in rows:
        v = np.asarray(r["values"], float)
        print(f"transfer {r['x']:<30} {r['method']:<14} {r['metric']:<12} "
              f"{v.mean() if v.size else float('nan'):.1f} ({v.size} units)")
    return record
