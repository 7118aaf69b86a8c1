"""The bad-paths family of the hostile catalogue (``benchmarks/security/hostile.py``): every binary
given a path it cannot use, as a user would give it, and a build interrupted by SIGINT.

    python -m benchmarks.security.hostile --only=paths/

Each case runs one binary as a subprocess (the repository's code, its data) on a private
temporary directory: a workdir or ``--out`` under a read-only mount or read-only with finished
results in it, a workdir or ``--out`` that is a file or lies under one, a workdir or run
directory that is missing, a store that is truncated, a ``--config`` (``--sweep``) that is
missing or a directory; and ``build_memory`` against a loopback OpenAI-format server, stopped
by SIGINT mid-task. A case passes when the binary ends with exit status 1 (130 for SIGINT),
its stderr is one line (for SIGINT: ends with the line saying the run can resume), no
traceback, the directory is byte-identical afterwards (nothing left behind, nothing stored lost;
after SIGINT the store is still a valid store), and (counted by ``hostile.py``) no process is
left. Read-only cases mount the directory read-only in a private mount namespace (``unshare
-m``, root only): file modes do not stop root. Where that cannot be done the cases are skipped
and counted as skipped.
"""
import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable

from countermem_jax.runtime.paths import data_root

REPO = pathlib.Path(__file__).resolve().parents[2]   # benchmarks/security/ -> the repository
PHASE_CONFIG = "configs/spider_react_cpu.py"
STUDY_CONFIG = "configs/studies/retrieval.py:cpu"
NO_MODEL = "--config.backbone.model_path=/nonexistent.gguf"   # loading it would fail otherwise
TIMEOUT_S = 240
RESUME = "interrupted: nothing stored is lost; run the same command again to resume"


class Skip(Exception):
    """The case cannot run on this host (the message says why)."""


@dataclasses.dataclass
class PathCase:
    """One binary and one bad path: ``setup(tmp)`` makes the path under ``tmp`` and returns the
    binary's arguments; ``read_only`` is the folder (under ``tmp``) mounted read-only."""
    binary: str
    path: str
    setup: Callable[[pathlib.Path], list[str]]
    read_only: str = ""
    expect: str = ""         # a piece of the one line the binary must print

    @property
    def name(self) -> str:
        return f"paths/{self.binary}/{self.path}"


# ------------------------------------------------------------------ what the cases stand on
def frozen_store(path: pathlib.Path) -> str:
    """Writes an empty frozen store at ``path`` and its hash beside it (``store_frozen.sha256``
    naming); returns the hash."""
    from countermem_jax.method.memory import MemoryStore, save_store
    from countermem_jax.phases import context
    from countermem_jax.protocol import config_files
    frozen = MemoryStore(context.method_config(config_files.load("configs/default.py")).store).freeze()
    save_store(frozen, path)
    path.with_name(path.stem + ".sha256").write_text(frozen.content_hash() + "\n")
    return frozen.content_hash()


def finished_workdir(root: pathlib.Path) -> pathlib.Path:
    """A workdir as a finished run leaves it (fingerprint, lock folder, frozen store and hash,
    metrics), for the read-only cases: nothing in it may change."""
    (root / ".locks").mkdir(parents=True)
    (root / "fingerprint.json").write_text(json.dumps({"build_memory": {"fields": {}}}))
    frozen_store(root / "store_frozen.jsonl")
    (root / "metrics.json").write_text("{}")
    return root


def evaluated_workdir(root: pathlib.Path) -> pathlib.Path:
    """A workdir after evaluate, as the report reads it, with a real frozen store and its
    hash (one base run and one CounterMem run over two held-out tasks)."""
    root.mkdir(parents=True)
    (root / "splits.json").write_text(json.dumps({"build": ["c1"], "train": [],
                                                  "validation": [], "eval": ["e1", "e2"]}))
    (root / "fingerprint.json").write_text(json.dumps({"build_memory": {
        "sha256": "f" * 64, "fields": {"backbone.kind": "openai", "method": "countermem",
                                       "agent.kind": "react", "data.benchmark": "bench"}}}))
    frozen_store(root / "store_frozen.jsonl")
    runs = {"base": [True, False], "countermem-dqn-seed0": [True, True]}
    (root / "metrics.json").write_text(json.dumps({
        "benchmark": "bench", "agent": "react", "method": "countermem", "selector": "dqn",
        "runs": {r: str(root / "eval" / r) for r in runs}, "seeds": ["0"]}))
    for run, solved in runs.items():
        (root / "eval" / run).mkdir(parents=True)
        (root / "eval" / run / "log.jsonl").write_text("".join(
            json.dumps({"event": "task_end", "run": run, "phase": "evaluation", "task_id": t,
                        "solved": s, "calls": 1, "tokens": 10, "benchmark": "bench",
                        "domain": "sql", **({"seed": 0} if run != "base" else {})}) + "\n"
            for t, s in zip(("e1", "e2"), solved)))
    return root


def truncate(path: pathlib.Path) -> None:
    """Cuts ``path`` to half its bytes, as a full disk or a killed copy leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def a_file(tmp: pathlib.Path) -> pathlib.Path:
    """A plain file whose content must stay as it was."""
    target = tmp / "results.txt"
    target.write_text("kept\n")
    return target


# ------------------------------------------------------------------ the catalogue
def _phase_cases(binary: str) -> list[PathCase]:
    """The bad paths of a binary that takes ``--config`` and ``--workdir``."""
    config = STUDY_CONFIG if binary == "study" else PHASE_CONFIG

    def args(workdir, cfg=config):
        extra = [] if binary == "study" else [NO_MODEL]
        return [f"--config={cfg}", f"--workdir={workdir}", *extra]

    return [
        PathCase(binary, "workdir_under_read_only_mount",
                 lambda t: args(t / "ro" / "runs" / "wd"), read_only="ro",
                 expect="read-only file system"),
        PathCase(binary, "read_only_finished_workdir",
                 lambda t: args(finished_workdir(t / "wd")), read_only="wd",
                 expect="read-only file system"),
        PathCase(binary, "workdir_is_a_file", lambda t: args(a_file(t)), expect="is a file"),
        PathCase(binary, "workdir_under_a_file", lambda t: args(a_file(t) / "wd"),
                 expect="lies under the file"),
        PathCase(binary, "config_missing", lambda t: args(t / "wd", t / "nope.py"),
                 expect="No such file or directory"),
        PathCase(binary, "config_is_a_directory", lambda t: args(t / "wd", t),
                 expect="Is a directory"),
    ]


def _mistyped_workdir_cases() -> list[PathCase]:
    """Phases refused on a workdir that does not exist: the refusal makes nothing there."""
    return [PathCase(binary, "mistyped_workdir",
                     lambda t: [f"--config={PHASE_CONFIG}", f"--workdir={t / 'typo' / 'wd'}",
                                NO_MODEL],
                     expect="no frozen store") for binary in ("train_selector", "evaluate")]


def _inspect_cases() -> list[PathCase]:
    def truncated(t):
        root = finished_workdir(t / "wd")
        truncate(root / "store_frozen.jsonl")
        return root
    return [
        PathCase("inspect_store", "workdir_missing", lambda t: [f"--workdir={t / 'nope'}"],
                 expect="does not exist"),
        PathCase("inspect_store", "workdir_is_a_file", lambda t: [f"--workdir={a_file(t)}"],
                 expect="is a file"),
        PathCase("inspect_store", "workdir_with_truncated_store",
                 lambda t: [f"--workdir={truncated(t)}"], expect="store_frozen.jsonl:"),
        PathCase("inspect_store", "store_truncated",
                 lambda t: [f"--store={truncated(t) / 'store_frozen.jsonl'}"],
                 expect="store_frozen.jsonl:"),
        PathCase("inspect_store", "store_missing", lambda t: [f"--store={t / 'nope.jsonl'}"],
                 expect="nope.jsonl"),
        PathCase("inspect_store", "store_is_a_directory", lambda t: [f"--store={t}"],
                 expect=""),
    ]


def _report_cases() -> list[PathCase]:
    def truncated(t):
        root = evaluated_workdir(t / "wd")
        truncate(root / "store_frozen.jsonl")
        return root
    return [
        PathCase("report", "out_read_only",
                 lambda t: [str(evaluated_workdir(t / "wd")), f"--out={t / 'ro' / 'report'}"],
                 read_only="ro", expect="read-only file system"),
        PathCase("report", "out_is_a_file",
                 lambda t: [str(evaluated_workdir(t / "wd")), f"--out={a_file(t)}"],
                 expect="is a file"),
        PathCase("report", "out_under_a_file",
                 lambda t: [str(evaluated_workdir(t / "wd")), f"--out={a_file(t) / 'r'}"],
                 expect="lies under the file"),
        PathCase("report", "run_dir_missing",
                 lambda t: [str(t / "nope"), f"--out={t / 'report'}"], expect="nope"),
        PathCase("report", "truncated_store",
                 lambda t: [str(truncated(t)), f"--out={t / 'report'}"],
                 expect="does not match the hash recorded"),
    ]


def _config_cases(binary: str, flag: str = "config") -> list[PathCase]:
    return [PathCase(binary, f"{flag}_missing", lambda t: [f"--{flag}={t / 'nope.py'}"],
                     expect="No such file or directory"),
            PathCase(binary, f"{flag}_is_a_directory", lambda t: [f"--{flag}={t}"],
                     expect="Is a directory")]


CASES: list[PathCase] = [
    *(case for binary in ("build_memory", "train_selector", "evaluate", "study")
      for case in _phase_cases(binary)),
    *_mistyped_workdir_cases(), *_inspect_cases(), *_report_cases(),
    *_config_cases("preflight"), *_config_cases("study_cost"), *_config_cases("sweep", "sweep"),
]
SIGINT_CASE = "paths/build_memory/sigint_mid_build"
NAMES = [case.name for case in CASES] + [SIGINT_CASE]


# ------------------------------------------------------------------ running a case
def snapshot(root: pathlib.Path) -> dict:
    """{relative path: sha256 or "dir"} of everything under ``root``."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _env() -> dict:
    """The binaries run this checkout's code on the configured data."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), os.environ.get("PYTHONPATH", "")]), "COUNTERMEM_DATA": str(data_root()),
        "JAX_PLATFORMS": "cpu"}


def read_only_prefix(folder: pathlib.Path) -> list[str]:
    """A command prefix running the rest with ``folder`` mounted read-only in a private mount
    namespace (gone with the process); ``Skip`` where that is not possible."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise Skip("a read-only mount needs root and unshare (file modes do not stop root)")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                           capture_output=True)
    if probe.returncode:
        raise Skip(f"unshare -m refused: {probe.stderr.decode().strip()[:80]}")
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount -o bind,ro "$0" "$0" && exec "$@"', str(folder)]


def check_one_line(rc: int, stderr: str, expect: str, status: int = 1,
                   last: str | None = None) -> list[str]:
    """What breaks the one-line rule: the exit status, a traceback, more than one line (or,
    with ``last``, a last line other than it), the expected piece missing."""
    failures = []
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if rc != status:
        failures.append(f"exit status {rc}, expected {status}")
    if "Traceback" in stderr:
        failures.append("traceback on stderr")
    if last is not None:
        if not lines or lines[-1].strip() != last:
            failures.append(f"last stderr line {lines[-1][:80] if lines else ''!r}")
    elif len(lines) != 1:
        failures.append(f"{len(lines)} lines on stderr")
    elif not lines[0].startswith("error: "):
        failures.append(f"the line is not an error line: {lines[0][:80]!r}")
    if expect and expect not in stderr:
        failures.append(f"{expect!r} not in the line")
    return failures


def run_path_case(case: PathCase) -> tuple[str, float, bool, list[str]]:
    """Runs one bad-path case; returns (the line printed, wall s, directory identical,
    failures)."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="countermem-paths-"))
    try:
        args = case.setup(tmp)
        prefix = []
        if case.read_only:
            (tmp / case.read_only).mkdir(exist_ok=True)
            prefix = read_only_prefix(tmp / case.read_only)
        before = snapshot(tmp)
        start = time.perf_counter()
        out = subprocess.run([*prefix, sys.executable, "-m", f"countermem_jax.{case.binary}",
                              *args], capture_output=True, text=True, cwd=REPO, env=_env(),
                             timeout=TIMEOUT_S)
        wall = time.perf_counter() - start
        failures = check_one_line(out.returncode, out.stderr, case.expect)
        identical = snapshot(tmp) == before
        if not identical:
            failures.append("the directory changed (something left behind or lost)")
        line = (out.stderr.strip().splitlines() or [""])[-1]
        return line, wall, identical, failures
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_sigint_case() -> tuple[str, float, bool, list[str]]:
    """``build_memory`` against a loopback OpenAI-format server (2 s per reply), SIGINT once
    its first task was saved: exit status 130, the resume line last, no traceback, and the
    store still a valid store holding the tasks saved before."""
    from countermem_jax.method.memory import StoreFormatError, load_store
    from benchmarks.testing.openai_server import server_process
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="countermem-paths-"))
    wd = tmp / "wd"
    try:
        with server_process(latency_s=2.0) as url:
            proc = subprocess.Popen(
                [sys.executable, "-m", "countermem_jax.build_memory", f"--config={PHASE_CONFIG}",
                 f"--workdir={wd}", "--config.backbone.kind=openai", "--config.backbone.model=m",
                 f"--config.backbone.base_urls={url}", "--config.backbone.cache_dir="],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=_env())
            deadline = time.time() + TIMEOUT_S
            while not (wd / "store.jsonl").exists() and proc.poll() is None \
                    and time.time() < deadline:
                time.sleep(0.2)
            start = time.perf_counter()
            proc.send_signal(signal.SIGINT)
            try:
                _, stderr = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, stderr = proc.communicate()
            wall = time.perf_counter() - start
        failures = check_one_line(proc.returncode, stderr, "", status=130, last=RESUME)
        try:
            done = load_store(wd / "store.jsonl").meta.get("processed_tasks", [])
            if not done:
                failures.append("the store lost the task saved before SIGINT")
        except (StoreFormatError, OSError) as err:
            failures.append(f"the store is not valid after SIGINT: {err}")
        return stderr.strip().splitlines()[-1] if stderr.strip() else "", wall, not failures, \
            failures
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(name: str) -> tuple[str, float, bool, list[str]]:
    """Runs the case called ``name`` (``NAMES``); ``Skip`` when this host cannot."""
    if name == SIGINT_CASE:
        return run_sigint_case()
    return run_path_case(next(case for case in CASES if case.name == name))
