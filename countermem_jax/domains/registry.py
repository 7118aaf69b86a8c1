"""Benchmark registry: one entry per benchmark name, mapping it to its loader and to what the paper
says about it (Appendix D.1: domain, checker, score, decision unit). Adding a benchmark is one
loader function plus one ``register`` call (``countermem_jax/domains/benchmarks.py``)."""
import dataclasses
from typing import Callable

PAPER_DOMAINS = ("Math", "Coding", "Formal", "Text-to-SQL", "SMT", "SAT")
FOUR_DOMAINS = ("Math", "Coding", "Text-to-SQL", "SAT")   # the main table's domains (§4.1)


class MissingData(FileNotFoundError):
    """A benchmark's files are not where its loader looks; the message says how to get them."""


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """``tasks(data_cfg)`` reads the tasks (raising ``MissingData`` with the command that gets
    them), ``evaluator(data_cfg)`` builds the checker (it may need a toolchain), ``domain`` is the
    action format. ``extra`` marks settings beyond the paper's twelve (not in the summaries).
    ``cpu`` says what runs on a CPU machine; ``data`` names the entry of the data registry
    (``countermem_jax/data/sources.json``)."""
    name: str
    title: str
    paper_domain: str
    checker: str
    score: str
    decision_unit: str
    tasks: Callable
    evaluator: Callable
    domain: object
    data: str
    cpu: str
    extra: bool = False

    def load(self, data_cfg):
        """(tasks, evaluator, domain) for a ``config.data`` section."""
        return self.tasks(data_cfg), self.evaluator(data_cfg), self.domain


BENCHMARKS: dict[str, Benchmark] = {}


def register(spec: Benchmark) -> Benchmark:
    if spec.name in BENCHMARKS:
        raise ValueError(f"benchmark {spec.name!r} is registered twice")
    if not spec.extra and spec.paper_domain not in PAPER_DOMAINS:
        raise ValueError(f"{spec.name}: paper domain {spec.paper_domain!r} not in {PAPER_DOMAINS}")
    BENCHMARKS[spec.name] = spec
    return spec


def get(name: str) -> Benchmark:
    """The registered benchmark, or ValueError listing every registered name."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ValueError(f"unknown benchmark {name!r}; registered: "
                         f"{', '.join(sorted(BENCHMARKS))}") from None


def paper_settings() -> list[Benchmark]:
    """The twelve settings of Appendix D.1, in the paper's order."""
    return [b for b in BENCHMARKS.values() if not b.extra]
