"""``python -m countermem_jax.data list | fetch NAME... | verify [NAME...] | calibrate | checkouts NAME``

  list        every registered benchmark: data present or missing under --root, files with a
              recorded sha256 present, download size, and what else it needs
  fetch       download the pinned release(s), verify every recorded sha256, unpack atomically into
              the loaders' layout, print what to set (COUNTERMEM_DATA); toolchains and
              per-instance environments are printed as the exact commands to run instead
  verify      re-check the recorded sha256 of the files under --root (exit 1 on a mismatch)
  calibrate   success of the trivial default action per solver setting and budget (headroom);
              the Spider questions whose reference result is empty, on the tuning pool's
              databases (--spider_db_ids; a report-pool database is refused: protocol/pools.py)
  checkouts   the git commands that create SWE-bench checkouts (printed, not run)
"""
import json
import pathlib
import sys

from absl import app, flags

from countermem_jax.data import fetch as fetch_lib
from countermem_jax.data import registry
from countermem_jax.protocol import pools
from countermem_jax.runtime.paths import data_root

# Flags shared by the subcommands; each subcommand reads only those it needs.
_ROOT = flags.DEFINE_string("root", None, "Data folder (default: $COUNTERMEM_DATA or "
                            "../shared/benchdata beside the repository).")
_ALLOW = flags.DEFINE_bool("allow_unverified", False, "Accept a source with no recorded sha256.")
_OUT = flags.DEFINE_string("out", "checkouts", "checkouts: where the clones go.")
_SPIDER_DB_IDS = flags.DEFINE_list("spider_db_ids", list(pools.tuning_pool()),
                                   "calibrate spider: the databases read (tuning pool only).")

# Each name has a ``cmd_<name>(root, names) -> exit code`` below; ``main`` dispatches by name.
COMMANDS = ("list", "fetch", "verify", "calibrate", "checkouts")


def _size(n: int) -> str:
    """Human-readable decimal size (B, KB, MB, GB) of ``n`` bytes."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000


def cmd_list(root: pathlib.Path, names) -> int:
    """``list``: one line per registered benchmark (optionally only ``names``) with its data status
    under ``root``; always exit 0. Generated benchmarks show as built-in.
    """
    from countermem_jax import domains
    print(f"data root: {root}")
    print(f"{'benchmark':18} {'data':11} {'status':8} {'known files':>13} {'size':>9}  needs")
    for spec in domains.BENCHMARKS.values():
        if names and spec.name not in names:
            continue
        if not spec.data:
            print(f"{spec.name:18} {'-':11} {'built-in':8} {'-':>13} {'-':>9}  nothing (generated)")
            continue
        e = registry.load()[spec.data]
        known = registry.manifest(e)
        present = sum((root / d).is_file() for d in known)
        status = "present" if (root / e["marker"]).exists() else "missing"
        needs = ("checkouts" if spec.name in ("swebench", "bugsinpy") else
                 "databases" if spec.name == "bird" else
                 "toolchain" if e.get("toolchain") else "")
        extra = " (extra)" if spec.extra else ""
        print(f"{spec.name:18} {spec.data:11} {status:8} {present:>5}/{len(known):<7} "
              f"{_size(e['known_bytes']):>9}  {needs or '-'}{extra}")
    print("size = files with a recorded sha256; the archives also carry the rest of each "
          "repository (their size is not recorded). Get one: python -m countermem_jax.data fetch "
          "<benchmark>")
    return 0


def cmd_fetch(root: pathlib.Path, names) -> int:
    """``fetch NAME...``: installs each named benchmark's data, then prints the export line.

    Stops at the first failure with exit 1 and the one-line reason (earlier names stay installed);
    what cannot be downloaded (toolchains, per-instance environments) is printed as the command
    to run instead.
    """
    if not names:
        print("fetch: name at least one benchmark (python -m countermem_jax.data list)")
        return 2
    for name in names:
        try:
            key = registry.data_key(name)
            report = fetch_lib.fetch(name, root, allow_unverified=_ALLOW.value)
        except (registry.UnknownData, fetch_lib.FetchError) as err:
            print(f"fetch {name}: {err}")
            return 1
        entry = registry.load()[key]
        print(f"{key}: installed {', '.join(report.folders)} under {root}")
        print(f"  verified {report.verified} files by their recorded sha256 (archive sha256 not "
              "recorded: GitHub archives are generated on request)")
        if report.unverified:
            print(f"  {len(report.unverified)} further files have no recorded sha256 (listed in "
                  f"{fetch_lib.RECEIPT} of each folder); {entry.get('unverified_note', '')}".rstrip())
        for key_ in ("toolchain", "instead"):
            if entry.get(key_):
                print(f"  still needed: {entry[key_]}")
    print(f"export COUNTERMEM_DATA={root}")
    return 0


def cmd_verify(root: pathlib.Path, names) -> int:
    """``verify [NAME...]``: re-hashes installed files; exit 1 if any differs from its record.

    Entries not installed are reported and skipped, not counted as failures.
    """
    keys = sorted({registry.data_key(n) for n in names}) if names else sorted(registry.load())
    status = 0
    for key in keys:
        if not (root / registry.load()[key]["marker"]).exists():
            print(f"{key:11} missing (python -m countermem_jax.data fetch {key})")
            continue
        ok, bad, missing = fetch_lib.verify(key, root)
        print(f"{key:11} {ok} ok, {len(bad)} differ, {len(missing)} missing")
        for path in bad[:10]:
            print(f"  sha256 mismatch: {path}")
        status |= bool(bad)
    return status


def cmd_calibrate(root: pathlib.Path, names) -> int:
    """``calibrate [satlib|smtlib|spider]``: prints the headroom table, the Spider questions
    whose reference result is empty, and the ``result:`` line."""
    from countermem_jax.data import calibrate
    settings = tuple(names) or ("satlib", "smtlib", "spider")
    if "spider" in settings:
        try:
            pools.require_tuning_pool("spider", _SPIDER_DB_IDS.value,
                                      "calibrate spider --spider_db_ids")
        except pools.PoolError as err:
            print(err)
            return 2
    rows, seconds = calibrate.calibrate(root, settings, _SPIDER_DB_IDS.value)
    print(calibrate.format_rows(rows))
    if "spider" in settings:
        empty, _ = calibrate.empty_reference_tasks(root / "spider", _SPIDER_DB_IDS.value)
        print("spider questions with an empty reference result (they verify nothing): "
              + (", ".join(empty) or "none"))
    print(calibrate.result_line(rows, seconds))
    return 0


def cmd_checkouts(root: pathlib.Path, names) -> int:
    """``checkouts swebench``: prints, does not run, one clone-and-checkout command per instance.

    Repositories are large and their clones are the user's decision; printing keeps this tool
    free of network side effects beyond the pinned archives.
    """
    if names != ["swebench"]:
        print("checkouts: only 'swebench' (BugsInPy has its own bugsinpy-checkout tool)")
        return 2
    path = root / registry.load()["swebench"]["marker"]
    if not path.exists():
        print(f"{path} not found: python -m countermem_jax.data fetch swebench")
        return 1
    instances = json.loads(path.read_text())
    for inst in instances if isinstance(instances, list) else instances["instances"]:
        dest = f"{_OUT.value}/{inst['instance_id']}"
        print(f"git clone https://github.com/{inst['repo']}.git {dest} && "
              f"git -C {dest} checkout {inst['base_commit']}")
    return 0


def main(argv):
    """Dispatches to ``cmd_<command>``; returns the exit code (2 for usage errors and unknown
    names).
    """
    if len(argv) < 2 or argv[1] not in COMMANDS:
        print(f"usage: python -m countermem_jax.data {{{'|'.join(COMMANDS)}}} [NAME...] "
              "[--root DIR]")
        return 2
    root = pathlib.Path(_ROOT.value).expanduser().resolve() if _ROOT.value else data_root()
    command, names = argv[1], argv[2:]
    try:
        return globals()[f"cmd_{command}"](root, names)
    except registry.UnknownData as err:
        print(err)
        return 2


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))
