"""The sweep binary: the grid of a sweep config, on a Ray cluster or in this process.

    python -m countermem_jax.sweep --sweep=configs/sweeps/<name>.py --dry_run   # the graph only
    python -m countermem_jax.sweep --sweep=configs/sweeps/<name>.py --dry_run --tokens_per_s=20480
    python -m countermem_jax.sweep --sweep=configs/sweeps/<name>.py --local     # one process
    python -m countermem_jax.sweep --sweep=configs/sweeps/<name>.py             # Ray (address auto)
"""
import sys

from absl import flags
from ml_collections import config_flags

from countermem_jax.runtime import jax_platform

jax_platform.choose_platform()  # before JAX is imported: CPU unless --jax_gpu, no preallocation

from countermem_jax import cli  # noqa: E402
from countermem_jax.phases import config_validation
from countermem_jax.sweep import SweepError, run_sweep  # noqa: E402

SWEEP = config_flags.DEFINE_config_file("sweep", None, "Sweep config file (configs/sweeps/).",
                                        lock_config=True)
DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the graph of phase runs; start nothing.")
LOCAL = flags.DEFINE_bool("local", False, "Run the graph in this process, without Ray.")
ADDRESS = flags.DEFINE_string("address", "auto", "Ray cluster address ('auto': the cluster this "
                              "host belongs to; 'local': a one-node Ray started here).")
REPORT = flags.DEFINE_bool("report", True, "Write the report over the evaluated workdirs.")
TOKENS_PER_S = flags.DEFINE_float("tokens_per_s", 0.0, "With --dry_run: the hosts' servers' "
                                  "completion tokens per second (the preflight's measurement), "
                                  "to print the grid's expected wall time.")
TOKENS_PER_CALL = flags.DEFINE_integer("tokens_per_call", 0, "With --dry_run: completion tokens "
                                       "per LLM call (0: each config's agent.max_tokens, a bound).")


def main(argv):
    """Runs (or with ``--dry_run`` prints) the sweep; exits 1 on a failed run or a bad config."""
    del argv
    try:
        outcome = run_sweep(cli.loaded_config(SWEEP, "sweep"), dry_run=DRY_RUN.value, local=LOCAL.value,
                            address=ADDRESS.value, report=REPORT.value,
                            tokens_per_s=TOKENS_PER_S.value, tokens_per_call=TOKENS_PER_CALL.value)
    except (SweepError, config_validation.ConfigError) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        sys.exit(1)
    sys.exit(0 if outcome is None or outcome.ok else 1)


if __name__ == "__main__":
    cli.run_main(main, required=("sweep",))   # bad paths and SIGINT: one line
