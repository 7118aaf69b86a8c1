"""Orbax checkpoints of the selector, with the metadata needed to refuse incompatible restores.

Layout: ``<dir>/<decisions>/{params,meta}`` managed by ``orbax.checkpoint.CheckpointManager``;
the best checkpoint (highest mean validation return) is tracked by Orbax's ``best_fn`` and also
written to ``<dir>/best.json`` for people and shell scripts.
"""
import json
import math
import os
import pathlib

import jax
import orbax.checkpoint as ocp

from countermem_jax.selector import features
from countermem_jax.selector.dqn import DQNConfig, init_state


class IncompatibleCheckpointError(ValueError):
    """The checkpoint was written for another observation layout or network."""


def _manager(directory: str | os.PathLike) -> ocp.CheckpointManager:
    options = ocp.CheckpointManagerOptions(
        max_to_keep=None, best_fn=lambda m: m["val_return"], best_mode="max",
        keep_checkpoints_without_metrics=True, create=True)
    return ocp.CheckpointManager(pathlib.Path(directory).resolve(), options=options)


def metadata(cfg: DQNConfig, seed: int, decisions: int, val_return: float) -> dict:
    return {"obs_version": features.OBS_VERSION, "obs_dim": features.OBS_DIM,
            "num_actions": features.NUM_ACTIONS, "slot_features": list(features.SLOT_FEATURE_NAMES),
            "budget_features": list(features.BUDGET_FEATURE_NAMES), "config": cfg.to_json(),
            "seed": int(seed), "decisions": int(decisions), "val_return": float(val_return)}


class SelectorCheckpointer:
    """Saves one seed's parameters every ``checkpoint_every`` decisions."""

    def __init__(self, directory: str | os.PathLike, cfg: DQNConfig, seed: int):
        self.directory = pathlib.Path(directory)
        self.cfg, self.seed = cfg, seed
        self._mngr = _manager(directory)

    def save(self, decisions: int, params, val_return: float) -> None:
        if not math.isfinite(val_return):
            raise ValueError(f"{self.directory}: validation return {val_return} at {decisions} "
                             "decisions is not finite; a checkpoint is chosen by its score")
        meta = metadata(self.cfg, self.seed, decisions, val_return)
        self._mngr.save(int(decisions), args=ocp.args.Composite(
            params=ocp.args.StandardSave(jax.device_get(params)), meta=ocp.args.JsonSave(meta)),
            metrics={"val_return": float(val_return)})
        self._mngr.wait_until_finished()
        returns = self.val_returns() | {int(decisions): float(val_return)}
        best = self._mngr.best_step()
        (self.directory / "best.json").write_text(json.dumps(
            {"best_step": best, "best_val_return": returns[best],
             "steps": list(self._mngr.all_steps()),
             "val_returns": {str(k): v for k, v in sorted(returns.items())}}, indent=1))

    def val_returns(self) -> dict[int, float]:
        """Validation return per saved step (as recorded in best.json)."""
        path = self.directory / "best.json"
        recorded = json.loads(path.read_text()).get("val_returns", {}) if path.exists() else {}
        out = {int(k): float(v) for k, v in recorded.items()}
        for step in self._mngr.all_steps():  # written before best.json kept the returns
            if step not in out:
                out[step] = float(self._mngr.restore(step, args=ocp.args.Composite(
                    meta=ocp.args.JsonRestore()))["meta"]["val_return"])
        return out

    def steps(self) -> list[int]:
        return list(self._mngr.all_steps())

    def best_step(self) -> int | None:
        return self._mngr.best_step()

    def close(self) -> None:
        self._mngr.close()


def _check_compatible(meta: dict, directory) -> None:
    expected = {"obs_version": features.OBS_VERSION, "obs_dim": features.OBS_DIM,
                "num_actions": features.NUM_ACTIONS}
    for key, value in expected.items():
        if meta.get(key) != value:
            raise IncompatibleCheckpointError(
                f"{directory}: checkpoint has {key}={meta.get(key)!r}, this code expects {value!r} "
                "(observation layout changed; retrain the selector or use a matching release)")


def restore(directory: str | os.PathLike, step: int | str = "best") -> tuple[dict, dict]:
    """(params, metadata) of a checkpoint; ``step`` is a decision count, "best" or "latest"."""
    directory = pathlib.Path(directory)
    if not directory.exists():
        raise FileNotFoundError(f"{directory}: no selector checkpoint directory")
    mngr = _manager(directory)
    try:
        if step == "best":
            step = mngr.best_step() if mngr.best_step() is not None else mngr.latest_step()
        elif step == "latest":
            step = mngr.latest_step()
        if step is None or step not in mngr.all_steps():
            raise FileNotFoundError(f"{directory}: no checkpoint {step!r}; available "
                                    f"{sorted(mngr.all_steps())}")
        meta = mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
        _check_compatible(meta, directory)
        cfg = DQNConfig.from_json(meta["config"])
        template = jax.device_get(init_state(cfg, 0).params)
        try:
            params = mngr.restore(step, args=ocp.args.Composite(
                params=ocp.args.StandardRestore(template)))["params"]
        except (ValueError, KeyError) as err:
            raise IncompatibleCheckpointError(
                f"{directory}/{step}: parameters do not fit the network {cfg.hidden}: {err}") from None
        return params, meta
    finally:
        mngr.close()
