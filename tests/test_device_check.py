"""launch/device_check.sh in its tiny CPU mode (--small): every part runs and the last line is the
`result:` JSON docs/speed.md reads. On a CPU machine the "gpu" side is the CPU, so both sides
must agree exactly."""
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_device_check_runs_every_part_at_a_tiny_size_on_the_cpu(tmp_path):
    out_file = tmp_path / "device_check.txt"
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    out = subprocess.run(["bash", str(ROOT / "launch" / "device_check.sh"), "--small", "--out",
                          str(out_file)], env=env | {"PYTHON": sys.executable},
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("result: ") and out_file.read_text() == out.stdout
    result = json.loads(last[len("result: "):])
    platform = result["platform"]
    assert platform["default"] == {"JAX_PLATFORMS": "cpu", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert platform["jax_gpu"] == {"JAX_PLATFORMS": "cuda,cpu",
                                   "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert platform["binary_child"] == ["cpu", "cpu", "false"]   # a binary stays on the CPU
    assert result["small"] and not result["gpu_present"]
    selector, retrieval = result["selector"], result["retrieval"]
    for side in ("gpu", "cpu"):
        assert selector[side]["train_1seed_s"] > 0 and selector[side]["five_over_one"] > 0
        assert retrieval[side]["batched_us_per_query"] > 0
    assert selector["max_param_difference"] == 0.0 and retrieval["same_top3"] == 1.0
    assert "selector: the CPU takes" in out.stdout and "retrieval: the CPU takes" in out.stdout
