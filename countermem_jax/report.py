"""The report binary: run directories in, the paper's main table, figures and report.md out.

    python -m countermem_jax.report WORKDIR_A WORKDIR_B ... --out /tmp/report
"""
import sys

from absl import flags

from countermem_jax import cli


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> flags.FlagHolder:
    """Defines ``--out`` in ``flag_values``; returns its holder. Only the binary defines it in
    absl's global flags (other tools in one process may have an ``--out`` of their own)."""
    return flags.DEFINE_string("out", None, "Directory for report.md, CSVs and PNGs.",
                               flag_values=flag_values)


def write(run_dirs: list[str], out: str) -> int:
    """Writes the report and prints the paths written; returns the exit status (1, with one
    ``error:`` line, for runs that cannot be compared or an ``--out`` that cannot be used)."""
    from countermem_jax.reporting import ReportError, build  # matplotlib only after the flags
    try:
        if not run_dirs:
            raise cli.PathError("give one or more run directories (evaluated workdirs or study "
                                "directories) before --out")
        cli.check_workdir(out, "--out")
        written = build.write_report(run_dirs, out)
    except (ReportError, cli.PathError, OSError) as err:
        print(cli.one_line(err), file=sys.stderr)
        return 1
    print(f"report: {written['report.md']}")
    for name, path in written.items():
        if name != "report.md":
            print(f"  {path}")
    return 0


def main(argv: list[str]) -> int:
    """The command line after the program name (run directories and ``--out``), parsed as absl
    flags in a registry of its own; returns the exit status. For callers in one process (a
    test, a notebook): the binary itself parses through absl's global flags."""
    registry = flags.FlagValues()
    out = define_flags(registry)
    run_dirs = registry([sys.argv[0], *argv])[1:]
    if out.value is None:
        print("error: give --out=DIR for the report", file=sys.stderr)
        return 1
    return write(run_dirs, out.value)


if __name__ == "__main__":
    _OUT = define_flags()
    cli.run_main(lambda argv: sys.exit(write(argv[1:], _OUT.value)), required=("out",),
                 interrupted="interrupted: run the same command again to write the report")
