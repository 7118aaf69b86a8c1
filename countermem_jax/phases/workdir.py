"""The files of one experiment directory and their fingerprints (paper Appendix C.3): evaluation
proves it ran on what construction and training produced (the frozen store's hash written at
freezing, each seed's best checkpoint's file fingerprint recorded by training).
"""
import json
import pathlib

from countermem_jax.method.memory import load_frozen, save_store
from countermem_jax.runtime.errors import UserError
from countermem_jax.runtime.file_hash import fingerprint
from countermem_jax.runtime.runlog import RunLog
from countermem_jax.method.selector import checkpoint, dqn, policies


class PhaseError(UserError, RuntimeError):
    """A phase cannot run: missing inputs, overlapping splits, or a changed artefact."""


class Workdir:
    """The files of one experiment; evaluation runs get their own directories under ``eval/``."""

    def __init__(self, path):
        """Names the artefacts (a resumed build writes ``store``, never the ``frozen`` one)."""
        self.root = pathlib.Path(path)
        self.root.mkdir(parents=True, exist_ok=True)
        self.store = self.root / "store.jsonl"
        self.frozen = self.root / "store_frozen.jsonl"
        self.frozen_hash = self.root / "store_frozen.sha256"
        self.selector = self.root / "selector"
        self.selector_fingerprints = self.selector / "fingerprints.json"
        self.splits = self.root / "splits.json"
        self.log = RunLog(self.root / "log.jsonl")
        self.metrics = self.root / "metrics.json"
        self.cache = self.root / "llm_cache"
        self.parse_failures = self.root / "parse_failures.jsonl"
        self.eval_runs = self.root / "eval"
        self.curves = self.root / "curves"   # TensorBoard event files (runtime/curves.py)

    def seed_dir(self, seed: int) -> pathlib.Path:
        """Selector seed ``seed``'s Orbax checkpoints and best.json."""
        return self.selector / f"seed_{seed}"

    def run_dir(self, run: str) -> pathlib.Path:
        """An evaluation run's own directory (its log.jsonl and metrics.json)."""
        path = self.eval_runs / run
        path.mkdir(parents=True, exist_ok=True)
        return path

    def run_log(self, run: str) -> RunLog:
        """The run log of evaluation run ``run``."""
        return RunLog(self.run_dir(run) / "log.jsonl")

    def write_frozen(self, frozen) -> None:
        """Saves the frozen store and the hash evaluation and training will insist on."""
        save_store(frozen, self.frozen)
        self.frozen_hash.write_text(frozen.content_hash() + "\n")

    def restore_frozen_hash(self) -> None:
        """Writes ``store_frozen.sha256`` again (deleted since freezing) from the hash the run
        log's construction ``phase_end`` recorded, once the frozen store has that content hash;
        refused in one line when the log records none or another."""
        recorded = [e.get("hash") for e in self.log.events("phase_end")
                    if e.get("phase") == "construction" and isinstance(e.get("hash"), str)]
        actual = load_frozen(self.frozen).content_hash()
        if not recorded or recorded[-1] != actual:
            found = f"records {recorded[-1][:16]}" if recorded else "records no hash"
            raise PhaseError(f"{self.frozen_hash}: missing, and the run log {found} for the "
                             f"frozen store (hash {actual[:16]}): it cannot be proven the store "
                             "construction froze; rebuild it in a new workdir")
        self.frozen_hash.write_text(actual + "\n")
        print(f"restored {self.frozen_hash} from the run log {self.log.path}")

    def load_frozen_checked(self):
        """The frozen store, refused unless its content hash is the one written at freezing."""
        if self.frozen.exists() and not self.frozen_hash.exists():
            raise PhaseError(f"{self.frozen_hash}: missing; run build_memory again to restore "
                             "it from the run log")
        if not self.frozen.exists() or not self.frozen_hash.exists():
            raise PhaseError(f"{self.frozen}: no frozen store; run build_memory first")
        return load_frozen(self.frozen, expected_hash=self.frozen_hash.read_text().strip())

    def record_best_checkpoints(self, best_steps: dict) -> None:
        """Writes, per seed, the best checkpoint's step and file fingerprint (what
        ``restore_seed`` insists on); seeds recorded earlier (a sweep) keep their entries."""
        prints = self._recorded_fingerprints()
        prints.update({str(seed): {"step": step, "fingerprint": fingerprint(self.seed_dir(seed) /
                                                                           str(step))}
                       for seed, step in best_steps.items()})
        self.selector_fingerprints.write_text(json.dumps(prints, indent=1))

    def _recorded_fingerprints(self) -> dict:
        """{seed: {"step", "fingerprint"}} as training recorded them ({} before any)."""
        if not self.selector_fingerprints.exists():
            return {}
        try:
            recorded = json.loads(self.selector_fingerprints.read_text())
            if not isinstance(recorded, dict):
                raise ValueError("expected {seed: {\"step\", \"fingerprint\"}}")
            return recorded
        except ValueError as err:
            raise PhaseError(f"{self.selector_fingerprints}: unreadable checkpoint fingerprints "
                             f"({err})") from None

    def restore_seed(self, seed: int):
        """The seed's best checkpoint (a greedy selector) and its directory, refused if it is not
        the one training recorded as best."""
        directory = self.seed_dir(seed)
        if not directory.exists():
            raise PhaseError(f"{directory}: no checkpoint for selector seed {seed}; run "
                             "train_selector with this seed in selector.seeds")
        params, meta = checkpoint.restore(directory, "best")
        step_dir = directory / str(meta["decisions"])
        expected = self._recorded_fingerprints().get(str(seed))
        if expected and (expected["step"] != meta["decisions"] or
                         expected["fingerprint"] != fingerprint(step_dir)):
            raise PhaseError(f"{step_dir}: the selector checkpoint is not the one training "
                             "recorded as best (modified or replaced)")
        return policies.GreedyDQN(dqn.DQNConfig.from_json(meta["config"]), params), step_dir

    def checkpoint_provenance(self, checkpoint_dirs: dict) -> dict:
        """{seed: {"step", "fingerprint", "path"}} of the checkpoints an evaluation used (the
        entries ``selector/fingerprints.json`` holds for them, and where they lie)."""
        return {str(seed): {"step": int(ckpt_dir.name), "fingerprint": fingerprint(ckpt_dir),
                            "path": str(ckpt_dir.relative_to(self.root))}
                for seed, ckpt_dir in checkpoint_dirs.items()}

    def artefact_fingerprints(self, frozen, checkpoint_dirs: dict) -> dict:
        """The frozen store's file and content hash and each evaluated checkpoint's fingerprint
        (taken before and after evaluation)."""
        return {"store_file": fingerprint(self.frozen), "store_hash": frozen.content_hash(),
                **{f"selector_checkpoint_seed{seed}": fingerprint(ckpt_dir)
                   for seed, ckpt_dir in checkpoint_dirs.items()}}
