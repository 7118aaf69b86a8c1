"""What an agent and the benchmark registry need to know about a domain (paper §3.1, Appendix D.1).

A ``Domain`` says how an action is written (the instructions of DRAFT_ACTION), how it is parsed
out of a reply (fence languages and an optional extraction), which rule edits Module I may try
(§3.2, Appendix B.4) and which task features a condition may test (the hint of DISTIL_RECORD,
§3.3). A ``Benchmark`` is one setting of Appendix D.1: its facts from the paper and the loaders
of its tasks and checker. Each domain family's module (``sql``, ``sat``, ``smt``, ``coding``,
``formal``) defines both; ``registry`` lists the benchmarks by name.
"""
import dataclasses
import pathlib
from typing import Callable

from countermem_jax.runtime.paths import data_root
from countermem_jax.method.prompting import parsers


@dataclasses.dataclass(frozen=True)
class Domain:
    """An action format and its rule edits. ``name`` labels the domain family (shown to memory
    baselines); ``fences`` are the code-fence languages preferred when a reply has several blocks;
    ``extract`` (optional) cuts the action out of the chosen block; ``rule_edits(task, action)``
    lists the rule operators' local variants of a failed action (empty where Module I allows
    none)."""
    name: str
    instructions: str
    condition_hint: str
    rule_edits: Callable   # (task, action) -> list[str]
    fences: tuple[str, ...] = ()
    extract: Callable | None = None   # (text) -> action
    # (task, action, outcome, taken edits, k) -> up to k (edit, family) pairs ranked without the
    # reference; where set, Module I fills its free slots from it instead of ``rule_edits``.
    ranked_edits: Callable | None = None

    def parse_action(self, reply: str) -> str:
        """The action in a model reply (ParseError when there is none), Appendix D.8."""
        return parsers.parse_action(reply, self.fences, self.extract)


class MissingData(FileNotFoundError):
    """A benchmark's files are not where its loader looks; the message says how to get them."""


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """One setting of Appendix D.1. ``tasks(data_cfg)`` reads the tasks (raising ``MissingData``
    with the command that gets them), ``evaluator(data_cfg)`` builds the checker (it may need a
    toolchain), ``domain`` is the action format. ``extra`` marks settings beyond the paper's
    twelve (not in the summaries). ``cpu`` says what runs on a CPU machine; ``data`` names the
    entry of the data registry (``countermem_jax/data/sources.json``)."""
    name: str
    title: str
    paper_domain: str
    checker: str
    score: str
    decision_unit: str
    tasks: Callable
    evaluator: Callable
    domain: Domain
    data: str
    cpu: str
    extra: bool = False

    def load(self, data_cfg):
        """(tasks, evaluator) for a ``config.data`` section."""
        return self.tasks(data_cfg), self.evaluator(data_cfg)


def require(path, benchmark: str, what: str = "") -> pathlib.Path:
    """``path`` if it exists, else MissingData naming the command that gets it."""
    path = pathlib.Path(path)
    if not path.exists():
        raise MissingData(
            f"{benchmark}: {what or 'data'} not found at {path}; get it with "
            f"`python -m countermem_jax.data fetch {benchmark}` (then set COUNTERMEM_DATA as it "
            "prints), or see `python -m countermem_jax.data list`")
    return path


def require_setting(data_cfg, key: str, benchmark: str, what: str, unset: str) -> pathlib.Path:
    """The path in ``data_cfg[key]``, for data the registry's archives cannot provide (databases,
    checkouts): MissingData with the message ``unset`` (how to get it) when the key is not set,
    or naming the path when it does not exist."""
    if not data_cfg.get(key):
        raise MissingData(unset)
    return require(data_cfg[key], benchmark, what)


def data_dir(data_cfg, default: str) -> pathlib.Path:
    """``data_cfg.data_dir`` if set, else ``default`` under the data root (``$COUNTERMEM_DATA``)."""
    return pathlib.Path(data_cfg.get("data_dir") or data_root() / default)


def distinct_edits(original: str, candidates) -> list[str]:
    """The candidates that differ from ``original`` and from each other up to whitespace, in
    their order (the rule operators of Module I never return the failed action itself)."""
    seen, out = {" ".join(original.split())}, []
    for c in candidates:
        key = " ".join(c.split())
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out
