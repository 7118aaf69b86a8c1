"""What a GPU changes for the JAX side, measured in one run (launch/device_check.sh, docs/speed.md).

    python -m benchmarks.speed.device_check [--small] [--decisions=2000] [--records=100000]

Needs only JAX (CUDA jaxlib on a GPU host), flax, optax, orbax, chex, absl and this source: no
vLLM, no network, no benchmark data. Four parts, each printed as it finishes:

1. platform: the settings every binary makes before JAX starts (runtime/jax_platform.py):
   without --jax_gpu JAX_PLATFORMS=cpu, with it cuda,cpu, and never preallocating
   (XLA_PYTHON_CLIENT_PREALLOCATE=false); a child process started as a binary is checked to
   run on the CPU, and on a GPU how much memory JAX holds after this whole run.
2. selector training (paper Appendix C.2): offline training on the same synthetic log of
   logged decisions (as benchmarks/speed/selector.py makes it), on the GPU against the CPU.
3. five seeds vmapped against one, on each device (the goal: five ≤ 2× one).
4. retrieval (Appendix B.4): batched and single top-3 at --records records on each device, and
   whether the two devices return the same records.
The last line is ``result: {json}``. --small runs every part at a tiny size on whatever JAX has
(the test on CPU machines: tests/test_device_check.py); without a GPU the "gpu" side is the CPU.
"""
import os
import subprocess
import sys
import time
import types

from absl import app, flags

_SMALL = flags.DEFINE_bool("small", False, "Tiny sizes: a check of the script, not a measurement.")
_DECISIONS = flags.DEFINE_integer("decisions", 2000, "Logged decisions the selector trains on.")
_RECORDS = flags.DEFINE_integer("records", 100_000, "Records in the retrieval store.")
_BATCH = flags.DEFINE_integer("batch", 256, "Queries per batched retrieval call.")

_CHILD = ("import os, sys; sys.argv = ['binary']; from countermem_jax.runtime import jax_platform;"
          " jax_platform.choose_platform(); import jax; print(jax.default_backend(),"
          " os.environ['JAX_PLATFORMS'], os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'])")


def _platform_settings() -> dict:
    """What ``choose_platform`` sets with and without --jax_gpu (read back from the environment),
    and the backend of a child process started the way a binary starts."""
    from countermem_jax.runtime import jax_platform
    seen = {}
    saved = {k: os.environ.get(k) for k in ("JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE")}
    for name, argv in (("default", ["binary"]), ("jax_gpu", ["binary", "--jax_gpu"])):
        os.environ.pop("JAX_PLATFORMS", None)
        jax_platform.choose_platform(argv)
        seen[name] = {"JAX_PLATFORMS": os.environ["JAX_PLATFORMS"],
                      "XLA_PYTHON_CLIENT_PREALLOCATE": os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"]}
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    child = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                           env=env, timeout=300)
    seen["binary_child"] = (child.stdout.split() or [f"failed: {child.stderr[-200:]}"])
    return seen


def _stub_if_missing(name: str) -> bool:
    """An empty module for ``name`` when it is not installed (jsonschema: retrieval's import
    chain reaches the reply constraints, which this check never validates). True if stubbed."""
    try:
        __import__(name)
        return False
    except ImportError:
        sys.modules[name] = types.ModuleType(name)
        return True


def _best(fn, repeats=3) -> float:
    from benchmarks.common import best_time
    return best_time(fn, repeats=repeats)


def _selector(devices: dict, decisions: int) -> dict:
    """Offline training, 1 and 5 seeds, on each device; the learned parameters compared."""
    import jax
    import numpy as np
    from countermem_jax.method.selector import dqn, training
    # the paper's schedule and network (Appendix C.2, Table 3), one chunk without checkpoints
    cfg = dqn.DQNConfig(total_decisions=decisions, hidden=(64, 64), learning_rate=1e-3,
                        adam_eps=1e-8, gamma=0.95, replay_capacity=10_000, batch_size=32,
                        learning_starts=100, train_every=4, target_sync_every=250,
                        epsilon_start=0.3, epsilon_end=0.05, exploration_fraction=1.0,
                        checkpoint_every=decisions, call_penalty=0.15, failure_penalty=0.25,
                        token_penalty=0.02, token_scale=10_000.0)
    from benchmarks.speed.synthetic import synthetic_log
    log = synthetic_log(decisions)
    out, params = {}, {}

    def train(seeds):
        return training.train_offline(cfg, log, seeds=seeds, validate=lambda p: float("nan"))
    for name, device in devices.items():
        with jax.default_device(device):
            start = time.perf_counter()
            states, _ = jax.block_until_ready(train((0,)))
            first = time.perf_counter() - start
            one = _best(lambda: jax.block_until_ready(train((0,))))
            jax.block_until_ready(train((0, 1, 2, 3, 4)))
            five = _best(lambda: jax.block_until_ready(train((0, 1, 2, 3, 4))))
        params[name] = jax.tree_util.tree_leaves(states.params)
        out[name] = {"compile_and_first_s": first, "train_1seed_s": one,
                     "train_5seeds_vmapped_s": five, "five_over_one": five / one}
        print(f"selector on {name}: 1 seed {one * 1e3:.1f} ms (first run {first:.2f} s), "
              f"5 seeds vmapped {five * 1e3:.1f} ms = ×{five / one:.2f} of one (goal ≤ 2)",
              flush=True)
    out["cpu_over_gpu_1seed"] = out["cpu"]["train_1seed_s"] / out["gpu"]["train_1seed_s"]
    out["cpu_over_gpu_5seeds"] = (out["cpu"]["train_5seeds_vmapped_s"]
                                  / out["gpu"]["train_5seeds_vmapped_s"])
    out["max_param_difference"] = max(
        (float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
         for a, b in zip(params["gpu"], params["cpu"])
         if np.issubdtype(np.asarray(a).dtype, np.floating)), default=0.0)
    print(f"selector: the CPU takes ×{out['cpu_over_gpu_1seed']:.2f} the GPU's time (1 seed), "
          f"×{out['cpu_over_gpu_5seeds']:.2f} (5 seeds); largest parameter difference "
          f"{out['max_param_difference']:.2e}", flush=True)
    return out


def _retrieval(devices: dict, records: int, batch: int) -> dict:
    """Batched and single top-3 retrieval at ``records`` records on each device."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from countermem_jax.method import text_embedding as embedding
    from countermem_jax.method.retrieval.retrieve import ELIGIBLE, SAME_TASK, topk_eligible
    rng = np.random.default_rng(0)
    keys = rng.standard_normal((records, embedding.DIM)).astype(np.float32)
    keys /= np.linalg.norm(keys, axis=1, keepdims=True)
    reuse = rng.uniform(-1, 1, records).astype(np.float32)
    key_task = rng.integers(0, max(records // 2, 1), records).astype(np.int32)
    queries = rng.standard_normal((batch, embedding.DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    query_task = np.arange(batch, dtype=np.int32)
    reasons = np.where(key_task[None, :] == query_task[:, None], SAME_TASK,
                       ELIGIBLE).astype(np.int8)
    out, found = {}, {}
    for name, device in devices.items():
        with jax.default_device(device):
            k_d, r_d = jnp.asarray(keys.T.copy()), jnp.asarray(reuse)
            q_d, why_d = jnp.asarray(queries), jnp.asarray(reasons)

            def batched():
                return jax.block_until_ready(topk_eligible(q_d, k_d, r_d, why_d, 0.2, k=3))

            def single():
                return jax.block_until_ready(topk_eligible(q_d[:1], k_d, r_d, why_d[:1], 0.2,
                                                           k=3))
            found[name] = np.asarray(batched()[1])
            single()
            per_query = _best(batched) / batch
            one = _best(single)
        out[name] = {"batched_us_per_query": per_query * 1e6, "single_us": one * 1e6}
        print(f"retrieval on {name}, {records:,} records: batched {per_query * 1e6:.2f} µs/query, "
              f"single {one * 1e6:.1f} µs", flush=True)
    out["cpu_over_gpu_batched"] = (out["cpu"]["batched_us_per_query"]
                                   / out["gpu"]["batched_us_per_query"])
    out["cpu_over_gpu_single"] = out["cpu"]["single_us"] / out["gpu"]["single_us"]
    out["same_top3"] = float((found["gpu"] == found["cpu"]).all(axis=1).mean())
    print(f"retrieval: the CPU takes ×{out['cpu_over_gpu_batched']:.2f} the GPU's time batched, "
          f"×{out['cpu_over_gpu_single']:.2f} single; same top-3 on {out['same_top3']:.1%} of "
          "queries", flush=True)
    return out


def main(argv):
    del argv
    from countermem_jax.runtime import jax_platform
    from benchmarks.common import print_result
    started = time.perf_counter()
    small = _SMALL.value
    decisions = 200 if small else _DECISIONS.value
    records = 2_000 if small else _RECORDS.value
    batch = 16 if small else _BATCH.value
    result = {"small": small, "platform": _platform_settings()}
    # this process: as a binary started with --jax_gpu (a GPU when there is one)
    os.environ.pop("JAX_PLATFORMS", None)
    jax_platform.choose_platform(["device_check"] + ([] if small else ["--jax_gpu"]))
    import jax
    try:
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
    except RuntimeError as err:   # --jax_gpu on a host whose JAX has no CUDA backend
        sys.exit(f"JAX found no GPU backend ({str(err).splitlines()[0]}): install the `gpu` "
                 "extra (CUDA jaxlib), or run with --small for the CPU check")
    devices = {"gpu": gpus[0] if gpus else jax.devices("cpu")[0], "cpu": jax.devices("cpu")[0]}
    result["devices"] = {k: str(v) for k, v in devices.items()}
    result["gpu_present"] = bool(gpus)
    print(f"platform: binaries {result['platform']['default']}, with --jax_gpu "
          f"{result['platform']['jax_gpu']}; a binary's child runs on "
          f"{result['platform']['binary_child'][0]}; devices here: {result['devices']}",
          flush=True)
    result["jsonschema_stubbed"] = _stub_if_missing("jsonschema")
    result["selector"] = _selector(devices, decisions)
    result["retrieval"] = _retrieval(devices, records, batch)
    if gpus and hasattr(gpus[0], "memory_stats"):
        stats = gpus[0].memory_stats() or {}
        result["gpu_memory"] = {k: stats.get(k) for k in ("bytes_in_use", "peak_bytes_in_use",
                                                          "bytes_limit", "bytes_reserved")}
        if stats.get("bytes_limit"):
            share = stats.get("peak_bytes_in_use", 0) / stats["bytes_limit"]
            result["gpu_memory"]["peak_share_of_limit"] = share
            print(f"GPU memory: peak {stats.get('peak_bytes_in_use', 0) / 2**20:.0f} MiB of "
                  f"{stats['bytes_limit'] / 2**30:.0f} GiB ({share:.2%}; preallocation would "
                  "hold 75 %)", flush=True)
    result["wall_s"] = time.perf_counter() - started
    print_result(result)


if __name__ == "__main__":
    app.run(main)
