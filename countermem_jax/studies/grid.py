"""A variant study over the four domains of Table 1 and both agents in one command (paper §6:
Fig. 4's numbers are four-domain gains of ReAct and of Reflexion, each over its own base agent).

The study config is a variant study (``countermem_jax.studies``) with a ``grid`` section:
  ``grid.benchmarks``     the benchmarks run (default: the paper settings of Table 1's four
                          domains, ``registry.FOUR_DOMAINS``);
  ``grid.agents``         the base agents ("react", "reflexion");
  ``grid.setting_sizes``  True: each benchmark takes its paper setting's split sizes
                          (the study config's ``settings``); False: every setting keeps ``base``'s
                          sizes (a small run); the setting's data fields apply either way;
  ``grid.full``           the variant that is the full method (the paired tests' reference);
  ``grid.executor``       "local" (one setting after another) or "ray" (one Ray task per
                          setting; ``grid.ray_address`` "" starts a local cluster).
Each (benchmark, agent) setting is an ordinary variant study in ``DIR/<benchmark>/<agent>/``
(``runner.run_study``: the variants of a setting share its build, selector and base run). A
setting whose checker or data is absent on this machine is not run and recorded as such
("not run: Lean absent"), so the report never averages three domains as if four.

``DIR/study.json`` (schema "countermem-study-domains/1") lists the settings with their status
and directory, the variants, the full method and the panels; the report reads each setting's
own ``study.json`` from there (``reporting.domain_studies``).
"""
import json
import os
import pathlib

import ml_collections

from countermem_jax.phases import config_validation
from countermem_jax.protocol import provenance
from countermem_jax.domains import MissingData, registry
from countermem_jax.studies import cells, runner

SCHEMA = "countermem-study-domains/1"
# The binary each checker needs, as named in a "not run" status.
_CHECKERS = {"lake": "Lean", "lean": "Lean", "dafny": "Dafny 4", "verus": "Verus"}


def four_domain_benchmarks() -> tuple:
    """The paper settings of Table 1's four domains (Math, Coding, Text-to-SQL, SAT), in the
    registry's order: the benchmarks Table 1 averages within each domain."""
    return tuple(b.name for b in registry.paper_settings()
                 if b.paper_domain in registry.FOUR_DOMAINS)


def grid_section(full: str, benchmarks=None) -> ml_collections.ConfigDict:
    """The ``grid`` section of a four-domain study config (fields in the module docstring)."""
    return ml_collections.ConfigDict(dict(
        benchmarks=tuple(benchmarks or four_domain_benchmarks()), agents=("react", "reflexion"),
        setting_sizes=True, full=full, executor="local", ray_address=""))


def setting_configs(study) -> dict:
    """{(benchmark, agent): the setting's variant study config}: ``study`` with ``base`` moved to
    that benchmark (its paper sizes unless ``grid.setting_sizes`` is off) and agent."""
    out = {}
    for bench in study.grid.benchmarks:
        if bench not in registry.BENCHMARKS:  # refused in one line before anything runs
            raise config_validation.ConfigError(
                f"bad study config: grid.benchmarks names {bench!r}; registered: "
                f"{', '.join(registry.BENCHMARKS)}")
        for agent in study.grid.agents:
            base = cells.setting_config(study.base, bench, study.get("settings"),
                                        **{"agent.kind": agent})
            if not study.grid.setting_sizes:  # the setting's data fields, base's split sizes
                base.splits.update(study.base.splits.to_dict())
            sub = ml_collections.ConfigDict(
                {k: v for k, v in study.to_dict().items() if k not in ("grid", "base", "settings")})
            sub.base = base
            out[(bench, agent)] = sub
    if study.grid.full not in study.variants:
        raise config_validation.ConfigError(
            f"bad study config: grid.full={study.grid.full!r} is not a variant")
    for sub in out.values():
        runner.variant_configs(sub)  # each variant of each setting validated before any run
    return out


def availability(data_cfg, load=None):
    """(benchmark triple or None, status): "ran" when the tasks load and the checker can be built
    here, else "not run: <checker> absent" / "not run: data absent (...)". ``load`` replaces the
    registry's loader (tests)."""
    from evaluators.formal.tools import ToolMissing
    try:
        return (load or _load)(data_cfg), "ran"
    except ToolMissing as err:
        binary = str(err).split("'")[1] if "'" in str(err) else "checker"
        return None, f"not run: {_CHECKERS.get(binary, binary)} absent"
    except MissingData as err:
        what = " ".join(str(err).split()).split("; ")[0]   # the loader's how-to is for the docs
        return None, f"not run: data absent ({what[:160]})"


def _load(data_cfg):
    """The tasks, evaluator and domain of a registered benchmark (checker built here, so an
    absent toolchain is found before any model call)."""
    spec = registry.get(data_cfg.benchmark)
    return spec.tasks(data_cfg), spec.evaluator(data_cfg), spec.domain


def run_grid(study, workdir, *, config_path: str = "", backbone_factory=None,
             load=None) -> dict:
    """Runs every available (benchmark, agent) setting's variant study and writes
    ``DIR/study.json``; prints the four-domain table of the study's panels. ``backbone_factory``
    and ``load`` (data_cfg -> (tasks, evaluator, domain), may raise ``ToolMissing``) are for
    tests with the scripted backbone."""
    subs = setting_configs(study)
    root = pathlib.Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    loaded, settings = {}, []
    for (bench, agent), sub in subs.items():
        if bench not in loaded:  # one load (and one checker probe) per benchmark
            loaded[bench] = availability(sub.base.data, load)
        status = loaded[bench][1]
        settings.append({"benchmark": bench, "agent": agent, "status": status,
                         "domain": registry.get(bench).paper_domain,
                         "dir": f"{bench}/{agent}"})
    todo = [s for s in settings if s["status"] == "ran"]
    if study.grid.executor == "ray":
        _run_on_ray(study, subs, todo, root, config_path, backbone_factory, load)
    else:
        for s in todo:
            runner.run_study(subs[(s["benchmark"], s["agent"])], root / s["dir"],
                             config_path=config_path, backbone_factory=backbone_factory,
                             benchmark=loaded[s["benchmark"]][0])
    record = {
        "schema": SCHEMA, "study": study.study, "title": study.get("title", study.study),
        "paper": study.get("paper", ""), "config": config_path,
        "command": f"python -m countermem_jax.study --config={config_path} --workdir={root}",
        "code_version": provenance.code_version(),
        "backbone": study.base.backbone.get("model") or study.base.backbone.get("model_path")
        or study.base.backbone.kind,
        "domains": list(registry.FOUR_DOMAINS), "agents": list(study.grid.agents),
        "full": study.grid.full,
        "variants": {v: study.variants[v].get("label", v) for v in study.variants},
        "panels": [dict(p) for p in study.grid_panels], "settings": settings}
    (root / runner.STUDY_FILE).write_text(json.dumps(record, indent=1))
    from countermem_jax.reporting import domain_studies  # numpy only, no plotting
    record["_dir"] = str(root)
    print(domain_studies.table(record))
    print(f"study.json: {root / runner.STUDY_FILE}")
    return record


def _run_on_ray(study, subs, todo, root, config_path, backbone_factory=None,
                load=None) -> None:
    """One Ray task per setting, each loading its own benchmark and backbone (with ``load`` and
    ``backbone_factory`` when given, as in the tests); the settings share nothing, so their
    order does not change any artefact. A local cluster's workers import this checkout."""
    import ray
    if not ray.is_initialized():
        package_root = str(pathlib.Path(__file__).resolve().parents[2])
        ray.init(address=study.grid.ray_address or None, include_dashboard=False,
                 log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(
                     [package_root, os.environ.get("PYTHONPATH", "")])}})

    @ray.remote
    def run_setting(sub_dict, wd):
        """A setting's variant study in a Ray worker."""
        sub = ml_collections.ConfigDict(sub_dict)
        runner.run_study(sub, wd, config_path=config_path, backbone_factory=backbone_factory,
                         benchmark=load(sub.base.data) if load else None)
        return wd
    ray.get([run_setting.remote(subs[(s["benchmark"], s["agent"])].to_dict(),
                                str(root / s["dir"])) for s in todo])
