"""A phase run with one fault injected at a named point, for tests/test_faults_*.py:

    python tests/fault_worker.py ROOT WORKDIR WAVE_SIZE PHASE FAULT AT

runs ``PHASE`` (build_memory or train_selector) of the scripted pipeline (test_pipeline's
config and replies, selector config of test_selector_waves) on WORKDIR as a binary does (one
``error:`` line and exit 1 for a user or file-system error), with FAULT injected at the AT-th
time its point is reached (counted from 1):

  kill_mid_write    the run log's AT-th batch (``write_all``) gets 3/4 of its bytes, then SIGKILL
  fsize_mid_write   RLIMIT_FSIZE set so the run log's AT-th batch stops half way (EFBIG)
  full_mid_write    the file system (a tmpfs) filled so the AT-th batch stops part way (ENOSPC)
  kill_before_hash  SIGKILL after Orbax committed the AT-th checkpoint, before its hash record
  kill_in_orbax     SIGKILL while Orbax writes the AT-th checkpoint
  fsize_in_orbax    RLIMIT_FSIZE of 1 KB from the AT-th checkpoint save on (EFBIG inside Orbax)
  full_in_orbax     the file system filled before the AT-th checkpoint save (ENOSPC in Orbax)

A filled file system is filled by ``WORKDIR/../filler``, which the test removes to resume.
"""
import os
import pathlib
import resource
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PAGE = 4096


def _fill(directory: pathlib.Path, keep: int) -> None:
    """Fills the file system of ``directory`` up to ``keep`` free bytes with ``../filler``."""
    stat = os.statvfs(directory)
    free = stat.f_bavail * stat.f_frsize
    with open(directory.parent / "filler", "ab") as f:
        os.posix_fallocate(f.fileno(), os.fstat(f.fileno()).st_size, max(free - keep, PAGE))


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def inject(fault: str, at: int, workdir: pathlib.Path) -> None:
    from countermem_jax.method.selector import checkpoint
    from countermem_jax.runtime import runlog
    seen = [0]

    def reached() -> bool:
        seen[0] += 1
        return seen[0] == at

    if fault.endswith("_mid_write"):
        append, write_all, in_batch = runlog._append, runlog.RunLog.write_all, [False]

        def batch(self, events):
            in_batch[0] = True
            try:
                return write_all(self, events)
            finally:
                in_batch[0] = False

        def faulty(path, text, sync):
            data = text.encode("utf-8")
            if not (in_batch[0] and text) or not reached():
                return append(path, text, sync)
            size = os.path.getsize(path) if os.path.exists(path) else 0
            if fault == "kill_mid_write":
                with open(path, "ab") as f:   # past the first line: a whole line, a cut one
                    f.write(data[:len(data) * 3 // 4])
                _kill()
            if fault == "fsize_mid_write":
                resource.setrlimit(resource.RLIMIT_FSIZE,
                                   (size + len(data) // 2, resource.RLIM_INFINITY))
            if fault == "full_mid_write":
                slack = -size % PAGE   # the log's last page takes that much without a new one
                _fill(workdir, max(0, (len(data) - slack) // 2) // PAGE * PAGE)
            return append(path, text, sync)
        runlog._append, runlog.RunLog.write_all = faulty, batch
    elif fault == "kill_before_store_save":   # a task's events logged, the store not saved
        from countermem_jax.phases import build
        save_store = build.save_store

        def then_kill(store, path):
            if reached():
                _kill()
            return save_store(store, path)
        build.save_store = then_kill
    elif fault == "kill_before_hash":
        digests = checkpoint._file_digests

        def then_kill(step_dir):
            if reached():
                _kill()
            return digests(step_dir)
        checkpoint._file_digests = then_kill
    else:
        save = checkpoint.SelectorCheckpointer.save

        def faulty_save(self, decisions, params, val_return):
            if reached():
                if fault == "fsize_in_orbax":
                    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))
                elif fault == "full_in_orbax":
                    _fill(workdir, 0)
                elif fault == "readonly_in_orbax":   # the workdir turned read-only under it
                    for args in (["--bind"], ["-o", "remount,ro,bind"]):
                        subprocess.run(["mount", *args, str(workdir), str(workdir)], check=True)
                elif fault == "kill_in_orbax":
                    self._mngr.wait_until_finished = _kill   # Orbax's write is under way
            return save(self, decisions, params, val_return)
        checkpoint.SelectorCheckpointer.save = faulty_save


def config(root: pathlib.Path, wave_size: int):
    """The selector-wave tests' config (10 decisions, a checkpoint every 4)."""
    from test_pipeline import _config
    cfg = _config(root, selector="dqn")
    cfg.selector.update(total_decisions=10, checkpoint_every=4, wave_size=wave_size)
    return cfg


def benchmark(directory: pathlib.Path):
    """The pipeline tests' people benchmark over its own SQLite file in ``directory``."""
    import helpers
    from test_pipeline import QUESTIONS
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "people.sqlite").unlink(missing_ok=True)
    return helpers.people_benchmark(directory, {t: (q, g) for t, (q, g, _) in QUESTIONS.items()})


def run(root: pathlib.Path, workdir: pathlib.Path, wave_size: int, phase: str) -> None:
    """``phase`` of the scripted pipeline on ``workdir``, in-process."""
    from countermem_jax import experiment
    from test_pipeline import scripted
    getattr(experiment, phase)(config(root, wave_size), workdir, backbone=scripted(),
                               benchmark=benchmark(root / f"bench-{os.getpid()}"))


def main(argv) -> None:
    root, workdir, wave_size, phase, fault, at = argv[1:]
    from countermem_jax import cli
    inject(fault, int(at), pathlib.Path(workdir))
    with cli.one_line_errors():
        run(pathlib.Path(root), pathlib.Path(workdir), int(wave_size), phase)


if __name__ == "__main__":
    main(sys.argv)
