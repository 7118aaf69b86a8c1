"""What an agent and the benchmark registry need to know about a domain (paper §3.1, Appendix
D.1)."""
import dataclasses
import pathlib
import re
from typing import Callable

from countermem_jax.runtime.errors import UserError
from countermem_jax.runtime.paths import data_root
from countermem_jax.method import bounded_diff
from countermem_jax.method.conditions import ActionNames, EditNames
from countermem_jax.method.prompting import parsers

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Words that say nothing about which data an edit touched: language and SQL keywords,
# plus option names of the solver domains.
_KEYWORDS = frozenset("""
    and or not if else elif for while return def class in is none true false null let var fn mut
    pub use import from as with lambda pass break continue try except finally raise yield assert
    int bool str float nat real requires ensures invariant decreases assert method function
    lemma theorem by have show exact intro apply simp solver assumptions phases conflict_budget
    select where group order limit distinct join on having count sum avg min max asc desc
""".split())


def _identifiers(text: str) -> set[str]:
    """The identifiers of ``text`` longer than one letter, lower-cased, keywords dropped."""
    return {w.lower() for w in set(_IDENT.findall(text))
            if len(w) > 1 and w.lower() not in _KEYWORDS}


class TextNames:
    """The domain-neutral reading of an action's names (``ActionNames``): its identifiers, less
    keywords. An edit touches the identifiers on the lines it changed, any one of which a
    request must name; no error kinds are read from feedback."""

    def edit_names(self, original: str, improved: str, feedback: str = "") -> EditNames:
        """The identifiers on the lines the edit changed, as ``some`` (bounded diff)."""
        del feedback   # a textual edit's feedback names no kind of error
        a, b = original.splitlines(), improved.splitlines()
        changed = []
        for op, i1, i2, j1, j2 in bounded_diff.opcodes(a, b).opcodes:
            if op != "equal":
                changed += a[i1:i2] + b[j1:j2]
        return EditNames(some=frozenset().union(*map(_identifiers, changed)))

    def action_names(self, action: str) -> frozenset[str]:
        """Every identifier of ``action`` (each distinct one once: a long action repeats most)."""
        return frozenset(_identifiers(action))


TEXT_NAMES = TextNames()


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
    names: ActionNames = TEXT_NAMES   # the names its actions use, for derived conditions (§3.3)

    def parse_action(self, reply: str) -> str:
        """The action in a model reply (ParseError when there is none), Appendix D.8."""
        return parsers.parse_action(reply, self.fences, self.extract)


class MissingData(UserError, FileNotFoundError):
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
