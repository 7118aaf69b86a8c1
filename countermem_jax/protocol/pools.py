"""The tuning pool and the report pool: which Spider databases may shape a choice, which may only
be reported on (issue "a claim that holds where it was not tuned"; docs/ledger.md).

Every choice the CPU setting makes (databases, prompts, operators, thresholds, replay rules) is
made on the *tuning pool*. The *report pool* is read by the replication
(``configs/studies/replication.py``) with a config frozen before it runs, and by nothing else:
the tuning scripts (``benchmarks.tuning.record_yield``, ``benchmarks.tuning.sql_operators``, calibration,
any probe) call ``require_tuning_pool`` and refuse a report-pool database with one line, and the
phases (build_memory, train_selector, evaluate) refuse one under any config but the frozen
replication's run configs (``phases/report_pool.py``).

The rule, fixed on ``FIXED_ON`` and read from no outcome: a database that any committed CPU
configuration or probe had read before that date is in the tuning pool, whatever it did there
(listed in ``TUNED_BEFORE_FIXING`` with the commit that first read it); every other database of the
shipped Spider dev copy is in the report pool. A database added to the data later goes to the
pool its name's hash picks (``_hash_pool``), so no one chooses it by looking at it.
"""
import hashlib

FIXED_ON = "2026-11-27"

# Databases that earlier CPU configurations read (git log -G'db_ids' on the CPU config's files):
# 0ced0f3 (2026-11-22) and 79dc68e (2026-11-25) read the first eight, a16d692 (2026-11-25) and
# a64339c (2026-11-27) car_1 as well. They shaped the quickstart's choices, so none can be
# reported on.
TUNED_BEFORE_FIXING = {
    "spider": ("car_1", "concert_singer", "course_teach", "employee_hire_evaluation",
               "museum_visit", "pets_1", "poker_player", "singer", "tvshow"),
}
# Spider dev databases outside the shipped copy whose outcomes a run of the CPU config read
# (docs/ledger.md, U1-U4): should they ever be shipped, they tune, never report.
SEEN_OUTSIDE_THE_SHIPPED_COPY = {
    "spider": ("battle_death", "dog_kennels", "flight_2", "orchestra", "voter_1", "world_1"),
}

# The databases of the shipped Spider dev copy that no configuration had read on FIXED_ON.
REPORT_POOL = {
    "spider": ("cre_Doc_Template_Mgt", "network_1", "real_estate_properties",
               "student_transcripts_tracking"),
}

# Report-pool questions that seeded probes read before the pools were fixed (docs/ledger.md: the
# nested seed-0 draws of the yield and SQL-operator probes, benchmarks/tuning/; P1-P3,
# P5-P7, P12). The replication keeps them out of its evaluation sets; they may still serve
# construction or selector training, which no figure reports.
SEEN_BEFORE_FIXING = {
    "spider": tuple(f"spider/{db}/{i}" for db, ids in (
        ("cre_Doc_Template_Mgt", (303, 307, 324, 329, 336, 345, 346, 368)),
        ("network_1", (866, 878, 889, 894, 898, 906, 914)),
        ("real_estate_properties", (1031,)),
        ("student_transcripts_tracking", (520, 524, 552, 566, 572))) for i in ids),
}

TUNING, REPORT = "tuning", "report"


class PoolError(ValueError):
    """A tuning script was pointed at a report-pool database; the message is one line."""


def _hash_pool(name: str) -> str:
    """The pool of a database neither list names: the parity of its name's SHA-256, salted with
    the date the rule was fixed, so the split of new data is as blind as the first one."""
    digest = hashlib.sha256(f"countermem-pools-{FIXED_ON}:{name}".encode()).digest()
    return REPORT if digest[0] % 2 else TUNING


def pool_of(benchmark: str, env_id: str) -> str:
    """``"tuning"`` or ``"report"`` for one database (environment) of ``benchmark``."""
    if env_id in (TUNED_BEFORE_FIXING.get(benchmark, ())
                  + SEEN_OUTSIDE_THE_SHIPPED_COPY.get(benchmark, ())):
        return TUNING
    if env_id in REPORT_POOL.get(benchmark, ()):
        return REPORT
    return _hash_pool(env_id)


def report_pool(benchmark: str = "spider") -> tuple[str, ...]:
    """The report pool's databases of ``benchmark`` that the rule names, sorted."""
    return tuple(sorted(REPORT_POOL.get(benchmark, ())))


def seen_before_fixing(benchmark: str = "spider") -> frozenset[str]:
    """Task ids of report-pool questions that a probe read before the pools were fixed."""
    return frozenset(SEEN_BEFORE_FIXING.get(benchmark, ()))


def tuning_pool(benchmark: str = "spider") -> tuple[str, ...]:
    """The tuning pool's databases of ``benchmark`` that the rule names, sorted."""
    return tuple(sorted(TUNED_BEFORE_FIXING.get(benchmark, ())))


def require_tuning_pool(benchmark: str, env_ids, what: str) -> None:
    """Raise ``PoolError`` (one line naming ``what`` and the databases) when any of ``env_ids``
    is in the report pool. An empty ``env_ids`` means "every database" and is refused for a
    benchmark that has a report pool: a tuning script must name what it tunes on."""
    env_ids = tuple(env_ids or ())
    if not env_ids and REPORT_POOL.get(benchmark):
        raise PoolError(f"{what}: name the {benchmark} databases to tune on (every database "
                        f"would include the report pool {', '.join(report_pool(benchmark))}); "
                        f"the tuning pool is {', '.join(tuning_pool(benchmark))}")
    reported = sorted(e for e in env_ids if pool_of(benchmark, e) == REPORT)
    if reported:
        raise PoolError(f"{what}: {', '.join(reported)} {'is' if len(reported) == 1 else 'are'} "
                        f"in the report pool (fixed {FIXED_ON}, countermem_jax/protocol/pools.py), "
                        f"which only the replication reads; tune on {', '.join(tuning_pool(benchmark))}")
