"""The report binary: run directories in, the paper's main table, figures and report.md out.

    python -m countermem_jax.report WORKDIR_A WORKDIR_B ... --out /tmp/report

Writes into --out: report.md (embedding the figures and tables), domain_table.csv (Table 1
layout: paper domains and tokens), main_table.csv (per benchmark), scores.csv, differences.csv,
rescued_broken.csv, cost.csv, provenance.csv and one PNG per kind of data
(``countermem_jax.reporting``); per study directory (holding ``study.json``) its figure in the
paper's panel layout, study_<name>.csv and its paired tests. Runs that cannot be compared
(different held-out tasks, store hashes or recorded code versions) are refused with one line on
stderr and exit status 1, before anything is written.
"""
import argparse
import sys

from countermem_jax.reporting import ReportError


def main(argv=None) -> int:
    """Parses the arguments, writes the report and prints the paths written; returns the exit
    status (1, with one ``error:`` line, for runs that cannot be compared)."""
    parser = argparse.ArgumentParser(prog="python -m countermem_jax.report",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="evaluated workdirs (after the evaluate phase) and study "
                             "directories (holding study.json)")
    parser.add_argument("--out", required=True, help="directory for report.md, CSVs and PNGs")
    args = parser.parse_args(argv)
    from countermem_jax.reporting import build  # matplotlib only after the arguments parse
    try:
        written = build.write_report(args.run_dirs, args.out)
    except ReportError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    print(f"report: {written['report.md']}")
    for name, path in written.items():
        if name != "report.md":
            print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
