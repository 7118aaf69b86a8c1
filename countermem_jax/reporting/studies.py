"""Study directories (``DIR/study.json``) in the report: the numbers behind each study's figure
with 95% CIs and paired tests, and one PNG per study in the paper's panel layout.
"""
import itertools
import json
import pathlib

import numpy as np

from countermem_jax.reporting import stats
from countermem_jax.reporting.load import AGENT_LABELS, NOT_RECORDED, ReportError

STUDY_FILE = "study.json"
VARIANT_SCHEMA = "countermem-study/1"
ROWS_SCHEMA = "countermem-study-rows/1"
DOMAINS_SCHEMA = "countermem-study-domains/1"   # §6 over four domains (``domain_studies``)
SCHEMAS = (VARIANT_SCHEMA, ROWS_SCHEMA, DOMAINS_SCHEMA)


def is_study(path) -> bool:
    """``path`` is a study directory (holds ``study.json``) rather than an evaluated workdir."""
    return (pathlib.Path(path) / STUDY_FILE).is_file()


def load(path) -> dict:
    """One study.json, checked for a known schema; ``_dir`` records where it came from."""
    file = pathlib.Path(path) / STUDY_FILE
    try:
        record = json.loads(file.read_text())
    except (OSError, ValueError) as err:
        raise ReportError(f"{file}: unreadable study.json ({err})") from None
    schema = record.get("schema") if isinstance(record, dict) else None
    if schema not in SCHEMAS:
        raise ReportError(f"{file}: unknown study schema {schema!r} (expected one of {SCHEMAS})")
    record["_dir"] = str(pathlib.Path(path))
    return record


def _split_key(record: dict):
    """What identifies a study's held-out split: its recorded hash, else its task ids."""
    return record.get("splits_hash") or tuple(record.get("eval_task_ids", ()))


def check_studies(records: list, versions: list) -> None:
    """Refuses studies that would be reported together but were made by different code (also
    against the workdirs' recorded ``versions``: [(dir, version)]) or, for the same study, on
    different held-out splits."""
    # Only versions actually recorded are compared: NOT_RECORDED never matches or clashes.
    named = list(versions) + [(r["_dir"], r.get("code_version") or NOT_RECORDED)
                              for r in records]
    recorded = [(d, v) for d, v in named if v != NOT_RECORDED]
    for d, v in recorded[1:]:
        if v != recorded[0][1]:
            raise ReportError(f"refusing to mix {recorded[0][0]} and {d}: code versions differ "
                              f"({recorded[0][1]} vs {v})")
    # The same study on the same benchmark and agent must rest on one held-out split.
    first = {}
    for r in records:
        other = first.setdefault((r["study"], r.get("benchmark"), r.get("agent")), r)
        if _split_key(other) != _split_key(r):
            raise ReportError(f"refusing to mix {other['_dir']} and {r['_dir']} (study "
                              f"{r['study']}): their held-out splits differ")


# ----------------------------------------------------------------------------- numbers
def _interval_row(base: dict, mean, lo, hi, units: int, std=None) -> dict:
    """``base`` plus a mean with its 95% CI, the spread over runs and the units behind it,
    marked ``few_tasks`` under ``stats.MIN_TASKS`` units; ``None`` values stay undefined."""
    return {**base, "mean": mean, "ci95_low": lo, "ci95_high": hi, "std_over_runs": std,
            "units_n": units, "few_tasks": units < stats.MIN_TASKS,
            "estimate_method": "bootstrap over runs and units (intervals)"}


def _summary_row(base: dict, summary: dict | None) -> dict:
    """An interval row from a recorded ``{mean, ci95, std, tasks}`` summary (undefined if none)."""
    if not summary:
        return _interval_row(base, None, None, None, 0)
    lo, hi = summary["ci95"]
    return _interval_row(base, summary["mean"], lo, hi, int(summary.get("tasks") or 0),
                         summary.get("std"))


def _unit_groups(record: dict, r: dict, n: int) -> list | None:
    """A row's recorded ``unit_groups`` (one reference group per unit column), None where it
    has none; a list of the wrong length is a ``ReportError`` naming the study and row."""
    groups = r.get("unit_groups")
    if groups is not None and len(groups) != n:
        raise ReportError(f"{record['_dir']}: row {r['panel']}/{r['metric']}/{r['method']} "
                          f"has {len(groups)} unit_groups for {n} units")
    return groups


def _rows_schema(record: dict) -> list:
    """Rows of a ``countermem-study-rows/1`` record: a bootstrap summary of each row's per-unit
    ``values`` [runs × units], else its precomputed ``estimate`` (e.g. a ratio over solved
    tasks), else an undefined point."""
    out = []
    for i, r in enumerate(record["rows"]):
        base = {"study": record["study"], "panel": r["panel"], "title": r["title"],
                "metric": r["metric"], "ylabel": r.get("ylabel", r["metric"]),
                "method": r["method"], "x": r["x"], "runs": len(r.get("runs") or []) or 1,
                "units": r.get("units", "tasks")}
        if r.get("values") is not None:
            values = np.asarray(r["values"], np.float64)
            if values.size == 0:
                out.append(_interval_row(base, None, None, None, 0))
                continue
            s = stats.summarize(values, groups=_unit_groups(record, r, values.shape[-1]))
            out.append(_interval_row(base, s["mean"], *s["ci95"],
                                     r.get("tasks_behind") or values.shape[1], s["std"]))
        else:
            est = r.get("estimate")
            n = r.get("tasks_behind") or len(r.get("unit_ids") or []) or len(r.get("runs") or [])
            out.append(_summary_row(base, est and {**est, "tasks": n}) if est else
                       _interval_row(base, None, None, None, n))
            out[-1]["estimate_method"] = est["method"] if est else "undefined (no solved task)"
    return out


def value_at(entry: dict, dotted: str):
    """``entry``'s value at a dotted key of a ``study.json`` record ("score_vs_base",
    "metrics.harmful_use_rate", "by_task_kind.look_alike.harmful_use_rate"); None where absent.
    The one reading of a dotted key, shared by the runner's table and the report's figures."""
    node = entry
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _variant_schema(record: dict) -> list:
    """One row per figure panel, variant and plotted key (``kind`` "bar": the figure's
    ``value``; "grouped_bar": each of its ``values``; an optional ``baseline`` key is a further
    row beside them)."""
    out = []
    variants = record.get("variants", {})
    figures = record.get("figures") or [{"panel": "a", "title": "score", "kind": "bar",
                                         "variants": list(variants), "value": "score",
                                         "unit": "score (0-100)"}]
    n_tasks = len(record.get("eval_task_ids", ()))
    agent = AGENT_LABELS.get(record.get("agent"), str(record.get("agent")))
    for fig in figures:
        # Several plotted keys are told apart by key; a single key is labelled by the agent.
        keys = list(fig.get("values") or [fig["value"]])
        single = f"{agent} with the variant" if fig.get("baseline") else agent
        series = [(k, k if len(keys) > 1 else single) for k in keys]
        if fig.get("baseline"):
            # base_metrics.* are the memory-free base agent's figures on the same tasks
            label = (f"{agent} (base agent)" if fig["baseline"].startswith("base_metrics.")
                     else f"{fig['baseline']} (baseline)")
            series.append((fig["baseline"], label))
        for name in fig.get("variants", []):
            v = variants.get(name)
            if v is None:
                continue
            for key, method in series:
                value = value_at(v, key)
                base = {"study": record["study"], "panel": fig["panel"], "title": fig["title"],
                        "metric": key, "ylabel": fig.get("unit", key), "method": method,
                        "x": v.get("label", name), "runs": len(v.get("seeds", [])) or 1,
                        "units": "tasks"}
                if isinstance(value, dict):
                    out.append(_summary_row(base, value))
                else:  # a plain number (a rate over its own denominator): no CI in the record
                    out.append(_interval_row(base, value, None, None, n_tasks))
                    out[-1]["estimate_method"] = "plain value in study.json (no CI recorded)"
    return out


def rows(record: dict) -> list:
    """The numbers behind a study's figure: one flat dict per plotted point."""
    if record["schema"] == DOMAINS_SCHEMA:
        from countermem_jax.reporting import domain_studies
        return domain_studies.rows(record)
    return _rows_schema(record) if record["schema"] == ROWS_SCHEMA else _variant_schema(record)


def _per_task_mean(per_seed: dict, ids: list) -> np.ndarray:
    """Per task of ``ids``: its outcome averaged over seeds, in percent (paired tests, §4.4)."""
    return np.mean([[float(per_seed[s][t]) for t in ids] for s in per_seed], axis=0) * 100.0


def differences(record: dict) -> list:
    """Paired tests over tasks between every two methods (variants) on the same tasks."""
    out = []
    if record["schema"] == DOMAINS_SCHEMA:   # each variant against the full method
        from countermem_jax.reporting import domain_studies
        return domain_studies.differences(record)
    if record["schema"] == ROWS_SCHEMA:
        # Rows comparable pairwise: same panel, metric and x, with per-unit values and ids;
        # each method's per-unit value is averaged over its runs, then paired on shared units.
        groups = {}
        for r in record["rows"]:
            if r.get("values") is not None and r.get("unit_ids"):
                groups.setdefault((r["panel"], r["metric"], json.dumps(r["x"])), []).append(r)
        for (panel, metric, x), members in groups.items():
            for a, b in itertools.combinations(members, 2):
                ids = sorted(set(a["unit_ids"]) & set(b["unit_ids"]))
                if not ids or a["method"] == b["method"]:
                    continue
                va, vb = (np.asarray(m["values"], np.float64).mean(axis=0) for m in (a, b))
                ia, ib = ({t: i for i, t in enumerate(m["unit_ids"])} for m in (a, b))
                groups = stats.shared_groups(
                    [dict(zip(m["unit_ids"], _unit_groups(record, m, len(m["unit_ids"]))))
                     if m.get("unit_groups") is not None else None for m in (a, b)], ids)
                test = stats.paired_test([va[ia[t]] for t in ids], [vb[ib[t]] for t in ids],
                                         groups)
                out.append(_diff_row(record, panel, metric, json.loads(x), a["method"],
                                     b["method"], test))
        return out
    # Variant studies: each variant against the record's ``reference`` variant, or against the
    # base agent on the same tasks when there is no reference.
    variants = record.get("variants", {})
    reference = record.get("reference") or ""
    for name, v in variants.items():
        per_task = v.get("per_task") or {}
        seeds = {s: o for s, o in per_task.items() if s != "base"}
        if not seeds:
            continue
        ids = sorted(next(iter(seeds.values())))
        if reference in ("", "none", "base") or reference not in variants:
            if "base" not in per_task:
                continue
            a_label, a = "base agent", np.asarray([100.0 * per_task["base"][t] for t in ids])
        elif name == reference:
            continue
        else:
            ref = variants[reference]
            ref_seeds = {s: o for s, o in ref["per_task"].items() if s != "base"}
            a_label, a = ref.get("label", reference), _per_task_mean(ref_seeds, ids)
        groups = stats.shared_groups([v.get("task_groups"), variants.get(reference, {}).get(
            "task_groups") if a_label != "base agent" else None], ids)
        test = stats.paired_test(a, _per_task_mean(seeds, ids), groups)
        out.append(_diff_row(record, "score", "score", v.get("label", name), a_label,
                             v.get("label", name), test))
    return out


def _diff_row(record, panel, metric, x, a, b, test) -> dict:
    """One CSV row of a paired test of ``b`` against ``a`` (difference B − A, pp)."""
    return {"study": record["study"], "panel": panel, "metric": metric, "x": x, "method_a": a,
            "method_b": b, "tasks": test["tasks"], "difference_b_minus_a": test["difference"],
            "ci95_low": test["ci95"][0], "ci95_high": test["ci95"][1],
            "tasks_b_better": test["b_better"], "tasks_a_better": test["a_better"],
            "p_bootstrap": test["p_bootstrap"], "p_sign_test": test["p_sign_test"],
            "few_tasks": test["tasks"] < stats.MIN_TASKS}
