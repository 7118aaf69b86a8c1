"""The evaluator interface shared by every domain.

A ``Task`` is what a benchmark supplies; ``reset(task)`` gives the initial ``State``;
``evaluate(state, action)`` checks one action and returns an ``Outcome``. States are immutable
values, so evaluating any number of alternatives "from a copy or reset of s_t" (§3.3) can never
change the state they start from: ``state.after(action, outcome)`` builds the next state
explicitly. Each evaluator bounds every call in time; a check that times out or crashes returns
``completed=False`` with the reason instead of hanging the run.
"""
import abc
import dataclasses
import time
from typing import Any, Mapping

FEEDBACK_LIMIT = 800


class InputError(Exception):
    """A benchmark's files or data settings cannot be used (missing, malformed, naming what no
    file holds): the user's input, each message naming the file or field."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One benchmark item. ``reference`` is for the checker only and is never shown to the agent."""
    task_id: str
    domain: str
    benchmark: str
    prompt: str
    context: str
    decision_unit: str
    reference: Any = dataclasses.field(repr=False, compare=False, default=None)
    features: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    environment: str = ""  # e.g. the database or repository the task runs in

    def visible_text(self) -> str:
        """What the agent sees (and what retrieval embeds): prompt plus environment context."""
        return f"{self.prompt}\n\n{self.context}".strip()


@dataclasses.dataclass(frozen=True)
class Outcome:
    utility: float
    success: bool
    completed: bool
    feedback: str
    wall_time: float = 0.0
    world_model_calls: int = 1
    reason: str = ""            # why a check did not complete ("timeout", "crash: ...")
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if not 0.0 <= self.utility <= 1.0:
            raise ValueError(f"utility must lie in [0, 1], got {self.utility}")
        if len(self.feedback) > FEEDBACK_LIMIT:
            object.__setattr__(self, "feedback", truncate(self.feedback, FEEDBACK_LIMIT))

    @property
    def failed_attempt(self) -> bool:
        """Reached the checker and failed the success criterion (Appendix D.6)."""
        return self.completed and not self.success


@dataclasses.dataclass(frozen=True)
class Attempt:
    action: str
    outcome: Outcome


@dataclasses.dataclass(frozen=True)
class State:
    """The decision state: the task plus the evaluated attempts so far."""
    task: Task
    attempts: tuple[Attempt, ...] = ()

    def after(self, action: str, outcome: Outcome) -> "State":
        return dataclasses.replace(self, attempts=self.attempts + (Attempt(action, outcome),))

    @property
    def last(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 15] + " …[truncated]"


class Evaluator(abc.ABC):
    """An executable world model for one family of tasks."""
    name: str = "evaluator"
    version: str = "1"

    def reset(self, task: Task) -> State:
        return State(task)

    def evaluate(self, state: State, action: str) -> Outcome:
        """Checks ``action`` from ``state`` (which is left untouched)."""
        start = time.perf_counter()
        try:
            outcome = self._check(state.task, action)
        except TimeoutError as err:
            outcome = Outcome(0.0, False, False, f"check stopped at its time limit: {err}",
                              reason="timeout")
        except Exception as err:  # a checker crash must not take the run down
            outcome = Outcome(0.0, False, False, f"checker crashed: {type(err).__name__}: {err}",
                              reason=f"crash: {type(err).__name__}")
        return dataclasses.replace(outcome, wall_time=time.perf_counter() - start)

    def environment_digest(self, task: Task) -> str:
        """A digest of what ``task`` is checked against outside the task itself (a database
        file), or "" when the check reads nothing else (a formula, a test suite in the task).

        A stored record carries it with ``version`` (the world it was verified in): a record
        whose environment digest or checker version has changed since is stale, and retrieval
        refuses it until it is verified again (``countermem_jax.reverify_store``). May raise
        ``OSError`` when the environment cannot be read.
        """
        del task
        return ""

    @abc.abstractmethod
    def _check(self, task: Task, action: str) -> Outcome:
        """Domain check; may raise TimeoutError when its deadline passes."""

    def close(self) -> None:
        """Releases worker processes or connections."""
