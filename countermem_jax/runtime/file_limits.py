"""Open files: the soft limit raised to the hard one at start, and a warning where even the hard
limit is below what a config's concurrency needs.
"""
import resource
import sys

# Files a run holds besides its sockets and tasks: logs, stores, caches, the interpreter's own.
BASE_FILES = 256
# A hard limit of "unlimited" is capped here (the kernel's default fs.nr_open is 1,048,576).
UNLIMITED_CAP = 1 << 20


def raise_soft_limit() -> tuple[int, int]:
    """Sets the soft RLIMIT_NOFILE to the hard one; returns (soft, hard) after. Never fails:
    a platform that refuses keeps its limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNLIMITED_CAP if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, hard
    return target, hard


def files_needed(cfg) -> int:
    """Open files a run of ``cfg`` may hold at once: a socket per request in flight (served
    backbones only), a file per task in flight, and ``BASE_FILES``. A study config is read
    through its ``base`` run config; a config with neither needs ``BASE_FILES``."""
    run = cfg if "backbone" in cfg else cfg.get("base")
    if run is None or "backbone" not in run:
        return BASE_FILES
    served = run.backbone.get("kind") == "openai"
    sockets = int(run.backbone.get("max_concurrency") or 0) if served else 0
    tasks = int(run.get("eval", {}).get("concurrency") or 1)
    return sockets + tasks + BASE_FILES


def check(cfg, echo=lambda line: print(line, file=sys.stderr)) -> bool:
    """Raises the soft limit, then says (one line through ``echo``) when the hard limit is below
    ``files_needed(cfg)``; returns whether it is enough. The run goes on either way: a smaller
    concurrency may never reach the limit."""
    soft, hard = raise_soft_limit()
    need = files_needed(cfg)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return True
    echo(f"warning: open files are limited to {soft} (hard limit {hard}), below the ~{need} this "
         f"config may hold at once (backbone.max_concurrency + eval.concurrency + {BASE_FILES}): "
         "raise the hard limit (`ulimit -Hn`, LimitNOFILE= in a systemd unit, nofile in "
         "/etc/security/limits.conf) or lower the concurrency")
    return False
