"""Orbax checkpoints of the selector, with the metadata needed to refuse incompatible restores.

Layout: ``<dir>/<decisions>/{params,meta}`` managed by ``orbax.checkpoint.CheckpointManager``;
the best checkpoint (highest mean validation return) is tracked by Orbax's ``best_fn`` and
written to ``<dir>/best.json``, which is what ``restore(dir, "best")`` reads.

Integrity: beside each step, ``<dir>/<decisions>.sha256.json`` holds the sha256 of every file
Orbax wrote for the step and one sha256 over the saved arrays (tree path, dtype, shape, bytes) and
the metadata. ``restore`` checks the files before Orbax reads them and the restored arrays after,
so a flipped byte, a truncated or missing array file, a step directory swapped for another, or a
best step that no longer exists is a ``CheckpointIntegrityError`` naming the path, never a silent
restore of other weights. Unreadable metadata (``best.json``, the hash file, the step's ``meta``,
the ``metrics`` file Orbax ranks steps by) names its file.

Whole or absent: a step counts once its hash record exists. The record and ``best.json`` are
written atomically (temporary file, fsync, rename) after Orbax's own atomic commit; a step a
kill left without its record is dropped when the directory is next opened for training (one
line on stderr), and training saves it again. A write error inside Orbax (a full disk, a
file-size limit) is an ``OSError`` naming the step.
"""
import contextlib
import hashlib
import json
import logging
import math
import os
import pathlib
import re
import shutil
import sys
import threading

import jax
import numpy as np
import orbax.checkpoint as ocp

from countermem_jax.method.selector import features
from countermem_jax.method.selector.dqn import DQNConfig, init_state
from countermem_jax.runtime.errors import UserError


class IncompatibleCheckpointError(UserError, ValueError):
    """The checkpoint was written for another observation layout or network.

    Restoring it would silently feed the network features in an order it was not trained on, so
    the version and sizes of the observation are compared before any weight is read.
    """


class CheckpointIntegrityError(UserError, ValueError):
    """A checkpoint or its metadata is missing, unreadable, or not what was saved.

    The message starts with the offending path, so the binaries can print it as one line.
    """


def _hash_file(directory: pathlib.Path, step: int) -> pathlib.Path:
    """``<dir>/<step>.sha256.json``: the integrity record kept beside each step."""
    return directory / f"{int(step)}.sha256.json"


def _file_digests(step_dir: pathlib.Path) -> dict[str, str]:
    """sha256 of every file under a step directory, keyed by relative path."""
    return {str(p.relative_to(step_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(step_dir.rglob("*")) if p.is_file()}


def _arrays_digest(params, meta: dict) -> str:
    """One sha256 over the metadata and every parameter array (tree path, dtype, shape, bytes).

    Checked after Orbax has restored the arrays, so it also catches a step directory swapped for
    another whose files are internally consistent.
    """
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        array = np.ascontiguousarray(np.asarray(leaf))
        digest.update(f"{jax.tree_util.keystr(path)}|{array.dtype}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _read_json(path: pathlib.Path, what: str):
    """Parsed JSON of ``path``; missing or unreadable files name the file and what it is."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointIntegrityError(f"{path}: missing ({what})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointIntegrityError(f"{path}: unreadable {what} ({err})") from None


def read_best_step(directory: str | os.PathLike) -> int:
    """The best step recorded in ``<dir>/best.json``; an error naming the file if it is broken."""
    path = pathlib.Path(directory) / "best.json"
    best = _read_json(path, "best-checkpoint record")
    step = best.get("best_step") if isinstance(best, dict) else None
    if isinstance(step, bool) or not isinstance(step, int):
        raise CheckpointIntegrityError(f"{path}: field 'best_step' must be an integer, got "
                                       f"{step!r}")
    return step


def _verify_files(directory: pathlib.Path, step: int) -> dict:
    """Checks the step's files against its hash file; returns the hash record."""
    hash_path = _hash_file(directory, step)
    record = _read_json(hash_path, "checkpoint content hash")
    if (not isinstance(record, dict) or not isinstance(record.get("files"), dict)
            or not isinstance(record.get("arrays_sha256"), str)):
        raise CheckpointIntegrityError(f"{hash_path}: malformed content hash (expected 'files' "
                                       "and 'arrays_sha256')")
    step_dir = directory / str(step)
    actual = _file_digests(step_dir)
    for name in sorted(set(record["files"]) | set(actual)):
        if name not in actual:
            raise CheckpointIntegrityError(f"{step_dir / name}: missing (saved with the "
                                           "checkpoint)")
        if name not in record["files"]:
            raise CheckpointIntegrityError(f"{step_dir / name}: not part of the saved checkpoint")
        if actual[name] != record["files"][name]:
            raise CheckpointIntegrityError(f"{step_dir / name}: content changed since it was saved "
                                           f"(sha256 {actual[name][:16]}…, saved "
                                           f"{record['files'][name][:16]}…)")
    return record


def _write_atomic(path: pathlib.Path, text: str) -> None:
    """``text`` as ``path``, whole or not at all: a temporary file, fsynced, then renamed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _unrecorded_steps(directory: pathlib.Path) -> list[int]:
    """The last step Orbax committed when its hash record is missing (a kill between the two
    writes: saves are sequential, so no other step can be cut). Steps without records below
    recorded ones are not a cut save and are left for ``restore`` to refuse by name."""
    steps = sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit())
    unrecorded = [s for s in steps if not _hash_file(directory, s).exists()]
    return unrecorded if unrecorded[-1:] == steps[-1:] == unrecorded else []


def drop_unrecorded_steps(directory: str | os.PathLike) -> list[int]:
    """Removes a last step saved without its hash record (never restored; the resumed training
    saves it again), saying so in one line on stderr; returns the steps removed."""
    directory = pathlib.Path(directory)
    dropped = _unrecorded_steps(directory) if directory.is_dir() else []
    for step in dropped:
        shutil.rmtree(directory / str(step))
    if dropped:
        print(f"{directory}: dropped selector checkpoint(s) {dropped} saved without their "
              "content hash (the run was cut while saving); training saves them again",
              file=sys.stderr)
    return dropped


_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)")


class _DropOrbaxWriteErrors(logging.Filter):
    """Drops the log lines Orbax's background threads write about a failed file write (an
    ``OSError``, or tensorstore's message with the OS error code): ``save`` raises that error,
    which a binary prints in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or "orbax" not in record.pathname:
            return True
        error = record.exc_info[1] if record.exc_info else None
        text = f"{record.getMessage()} {error}"
        return not (isinstance(error, OSError) or "os_error_code" in text or "[Errno" in text)


logging.getLogger("absl").addFilter(_DropOrbaxWriteErrors())


def _join_orbax_threads(timeout_s: float = 60.0) -> None:
    """Waits for the background writers a failed save left running. A save can fail before
    Orbax awaits them; one still running when the interpreter shuts down logs a traceback
    (it can no longer start the threads it awaits its writes in). Their own errors are the
    failed write's, already being raised (Orbax's threads re-raise them from ``join``)."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and type(thread).__module__.startswith("orbax"):
            with contextlib.suppress(Exception):
                thread.join(timeout_s)


@contextlib.contextmanager
def _write_errors(step_dir: pathlib.Path):
    """An I/O failure inside Orbax (its ``ValueError`` carrying the OS error code, or an
    ``OSError``) raised as one ``OSError`` naming the step directory, once Orbax's background
    writers have ended."""
    try:
        yield
    except OSError as err:
        _join_orbax_threads()
        raise OSError(err.errno, f"saving the selector checkpoint failed: {err.strerror or err}",
                      str(step_dir)) from None
    except ValueError as err:
        _join_orbax_threads()
        code = _OS_ERROR_CODE.search(str(err))
        if code is None:
            raise
        errno = int(code.group(1))
        raise OSError(errno, f"saving the selector checkpoint failed: {os.strerror(errno)}",
                      str(step_dir)) from None


def check_metrics_files(directory: str | os.PathLike) -> None:
    """Refuses a step whose Orbax ``metrics`` file is not a JSON object with a finite
    ``val_return``, naming the file. Orbax reads every step's metrics when a manager opens the
    directory and would fail there with a bare ``JSONDecodeError``; the phases call this before
    their backbone is made."""
    for path in sorted(pathlib.Path(directory).glob("*/metrics/metrics")):
        metrics = _read_json(path, "Orbax checkpoint metrics")
        value = metrics.get("val_return") if isinstance(metrics, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise CheckpointIntegrityError(f"{path}: field 'val_return' must be a finite number, "
                                           f"got {value!r}")


def _manager(directory: str | os.PathLike, training: bool = False) -> ocp.CheckpointManager:
    """An Orbax ``CheckpointManager`` that keeps every step and tracks the best by ``val_return``.

    All steps are kept (``max_to_keep=None``): the evaluation checkpoint is chosen by validation
    return every 250 decisions (Appendix C.2), and the curve itself is part of the report.
    Training's manager (``training``) removes the temporary folder of a save a kill cut; a
    reader leaves it.
    """
    check_metrics_files(directory)
    options = ocp.CheckpointManagerOptions(
        max_to_keep=None, best_fn=lambda m: m["val_return"], best_mode="max",
        keep_checkpoints_without_metrics=True, create=True, cleanup_tmp_directories=training)
    return ocp.CheckpointManager(pathlib.Path(directory).resolve(), options=options)


def metadata(cfg: DQNConfig, seed: int, decisions: int, val_return: float) -> dict:
    """What a checkpoint records beside its weights, for compatibility checks and provenance.

    The observation version, size and feature names, the DQN config, the selector seed, the
    number of training decisions and the validation return of this checkpoint.
    """
    return {"obs_version": features.OBS_VERSION, "obs_dim": features.OBS_DIM,
            "num_actions": features.NUM_ACTIONS, "slot_features": list(features.SLOT_FEATURE_NAMES),
            "budget_features": list(features.BUDGET_FEATURE_NAMES), "config": cfg.to_json(),
            "seed": int(seed), "decisions": int(decisions), "val_return": float(val_return)}


class SelectorCheckpointer:
    """Saves one seed's parameters every ``checkpoint_every`` decisions.

    Each save also writes the step's integrity record and refreshes ``best.json`` (best step,
    its return, and the return of every step), so the checkpoint that evaluation must use can
    be read without opening Orbax. Opening drops the steps a kill left without their record
    and rewrites a ``best.json`` that does not list every step.
    """

    def __init__(self, directory: str | os.PathLike, cfg: DQNConfig, seed: int):
        self.directory = pathlib.Path(directory)
        self.cfg, self.seed = cfg, seed
        drop_unrecorded_steps(self.directory)
        self._mngr = _manager(directory, training=True)
        if self.steps() and self._recorded_steps() != self.steps():
            self._write_best(self.val_returns())

    def save(self, decisions: int, params, val_return: float) -> None:
        """Saves ``params`` as step ``decisions`` with its validation return; blocks until written.

        A non-finite return is refused: the best checkpoint is chosen by this number, and a NaN
        would silently win or lose every comparison.
        """
        if not math.isfinite(val_return):
            raise ValueError(f"{self.directory}: validation return {val_return} at {decisions} "
                             "decisions is not finite; a checkpoint is chosen by its score")
        meta = metadata(self.cfg, self.seed, decisions, val_return)
        step_dir = self.directory / str(int(decisions))
        with _write_errors(step_dir):
            self._mngr.save(int(decisions), args=ocp.args.Composite(
                params=ocp.args.StandardSave(jax.device_get(params)),
                meta=ocp.args.JsonSave(meta)), metrics={"val_return": float(val_return)})
            self._mngr.wait_until_finished()
        record = {"step": int(decisions), "files": _file_digests(step_dir),
                  "arrays_sha256": _arrays_digest(jax.device_get(params), meta)}
        # the step counts from here on: before it, a resume drops it and saves it again
        _write_atomic(_hash_file(self.directory, decisions), json.dumps(record, indent=1))
        self._write_best(self.val_returns() | {int(decisions): float(val_return)})

    def _write_best(self, returns: dict[int, float]) -> None:
        """``best.json``: the best step, its return and the return of every step."""
        best = self._mngr.best_step()
        _write_atomic(self.directory / "best.json", json.dumps(
            {"best_step": best, "best_val_return": returns[best],
             "steps": list(self._mngr.all_steps()),
             "val_returns": {str(k): v for k, v in sorted(returns.items())}}, indent=1))

    def _recorded_steps(self) -> list[int] | None:
        """The steps ``best.json`` lists (None when it is missing or unreadable)."""
        try:
            steps = json.loads((self.directory / "best.json").read_text(encoding="utf-8"))["steps"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return steps if isinstance(steps, list) else None

    def val_returns(self) -> dict[int, float]:
        """Validation return per saved step (as recorded in best.json)."""
        path = self.directory / "best.json"
        recorded = {}
        if path.exists():
            best = _read_json(path, "best-checkpoint record")
            recorded = best.get("val_returns", {}) if isinstance(best, dict) else {}
        out = {int(k): float(v) for k, v in recorded.items()}
        for step in self._mngr.all_steps():  # written before best.json kept the returns
            if step not in out:
                out[step] = float(self._mngr.restore(step, args=ocp.args.Composite(
                    meta=ocp.args.JsonRestore()))["meta"]["val_return"])
        return out

    def steps(self) -> list[int]:
        """Decision counts of all saved checkpoints, ascending."""
        return list(self._mngr.all_steps())

    def best_step(self) -> int | None:
        """Step with the highest validation return so far (None before any save)."""
        return self._mngr.best_step()

    def close(self) -> None:
        """Releases Orbax's background resources; call once when training ends."""
        self._mngr.close()


def _check_compatible(meta: dict, directory) -> None:
    """Refuses metadata whose observation version, size or action count differ from this code's."""
    expected = {"obs_version": features.OBS_VERSION, "obs_dim": features.OBS_DIM,
                "num_actions": features.NUM_ACTIONS}
    for key, value in expected.items():
        if meta.get(key) != value:
            raise IncompatibleCheckpointError(
                f"{directory}: checkpoint has {key}={meta.get(key)!r}, this code expects {value!r} "
                "(observation layout changed; retrain the selector or use a matching release)")


def restore(directory: str | os.PathLike, step: int | str = "best") -> tuple[dict, dict]:
    """(params, metadata) of a checkpoint; ``step`` is a decision count, "best" (the step
    ``best.json`` names) or "latest". The content hash is verified before and after reading."""
    directory = pathlib.Path(directory)
    if not directory.exists():
        raise FileNotFoundError(f"{directory}: no selector checkpoint directory")
    if step == "best":
        step = read_best_step(directory)
    mngr = _manager(directory)
    try:
        if step == "latest":
            step = mngr.latest_step()
        if step is None or step not in mngr.all_steps():
            raise CheckpointIntegrityError(f"{directory / str(step)}: no such checkpoint; "
                                           f"available {sorted(mngr.all_steps())}")
        # Files are checked before Orbax opens them: a swapped or truncated array file must be
        # refused, not restored as other weights.
        record = _verify_files(directory, step)
        try:
            meta = mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
        except (ValueError, OSError) as err:
            raise CheckpointIntegrityError(f"{directory / str(step) / 'meta'}: unreadable "
                                           f"checkpoint metadata ({err})") from None
        _check_compatible(meta, directory)
        cfg = DQNConfig.from_json(meta["config"])
        # Restoring into a template of the recorded network shape refuses parameters of another size.
        template = jax.device_get(init_state(cfg, 0).params)
        try:
            params = mngr.restore(step, args=ocp.args.Composite(
                params=ocp.args.StandardRestore(template)))["params"]
        except (ValueError, KeyError) as err:
            raise IncompatibleCheckpointError(
                f"{directory}/{step}: parameters do not fit the network {cfg.hidden}: {err}") from None
        if _arrays_digest(params, meta) != record["arrays_sha256"]:
            raise CheckpointIntegrityError(f"{directory / str(step)}: restored arrays or metadata "
                                           "differ from the ones saved (content hash mismatch)")
        return params, meta
    finally:
        mngr.close()
