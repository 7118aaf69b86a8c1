r"""Preflight: checks, in under five minutes, that the servers a config names can run it.

    python -m countermem_jax.preflight --config=configs/paper.py:spider,react,gptoss
"""
import sys

from absl import flags
from ml_collections import config_flags

from countermem_jax import cli
from countermem_jax.preflight import checks as preflight
from countermem_jax.runtime import file_limits

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=False)
_DURATION = flags.DEFINE_float("duration_s", 60.0, "Seconds of the throughput measurement.")
_CONCURRENCY = flags.DEFINE_integer("concurrency", None,
                                    "Requests in flight (default: backbone.max_concurrency).")


def main(argv):
    del argv
    cfg = cli.loaded_config(_CONFIG, "config")
    file_limits.check(cfg)
    try:
        report = preflight.run(cfg, _DURATION.value, _CONCURRENCY.value)
    except ValueError as err:   # a config that cannot be probed: one line, no traceback
        print(f"preflight: {err}", file=sys.stderr)
        sys.exit(1)
    print(preflight.render(report))
    sys.exit(0 if report.go else 1)


if __name__ == "__main__":
    cli.run_main(main, required=("config",), interrupted="interrupted: nothing was written")
