"""Voyager baseline (Wang et al. 2023, "Voyager"): a library of verified skills."""
from countermem_jax.baselines import prompts as baseline_prompts
from countermem_jax.baselines import common


class UnverifiedSkill(ValueError):
    """A skill offered without a checker-confirmed success."""


def admit_skill(memory, skill: dict, action: str, outcome, task_id: str) -> dict:
    """Stores a skill only when ``outcome`` is a completed, successful check of ``action``."""
    if outcome is None or not (outcome.completed and outcome.success):
        raise UnverifiedSkill(f"skill {skill.get('name')!r} from task {task_id} was not confirmed "
                              "by the checker; only verified successes enter the library")
    names = {i["name"] for i in memory.of_kind("skill")}
    name, version = skill["name"], 2
    while name in names:
        name, version = f"{skill['name']}V{version}", version + 1
    return memory.add("skill", [task_id], name=name, description=skill["applies_when"],
                      steps=list(skill["steps"]), action=action,
                      verified={"utility": outcome.utility, "success": outcome.success})


class VoyagerAugmentation(common.SimilarityAugmentation):
    """Voyager at use time: the skills whose applicability best matches the task."""
    kind = "skills verified on earlier tasks"
    match_field = "description"

    def render(self, item) -> str:
        """A skill as shown: name, when to use it, its steps and the verified action."""
        return (f"Skill {item['name']} (use when: {item['description']})\nSteps: "
                + "; ".join(item["steps"]) + f"\nVerified action:\n{item['action']}")


class VoyagerBuilder(common.Builder):
    """Adds a skill for every construction task that ends in a checker-confirmed success."""
    augmentation_cls = VoyagerAugmentation

    async def learn(self, ctx) -> dict:
        """Describes the final verified action as a skill and admits it; unverified runs add
        nothing.
        """
        last = ctx.state.last
        if not common.verified_success(last):
            return {"skill": None, "reason": "not verified by the checker"}
        parsed = await self.agent.llm(ctx, baseline_prompts.VOYAGER_SKILL, {
            "trajectory": common.trajectory_text(ctx.task, [last])})
        if not parsed.ok:
            return {"skill": None, "reason": "VOYAGER_SKILL contract broken"}
        item = admit_skill(self.memory, parsed.value, last.action, last.outcome, ctx.task.task_id)
        return {"skill": item["item_id"], "name": item["name"]}
