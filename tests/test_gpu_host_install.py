"""launch/install_gpu_host.sh on bare hosts: the Python's venv, headers and compiler checked
first, the vLLM build picked from the driver's CUDA version (`nvidia-smi` banners real hosts
printed, tests/fake_bin/recorded/), a driver no wheel runs on refused in one line, and an
installed vLLM asked whether it takes every flag serve_vllm.sh passes."""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "launch" / "install_gpu_host.sh"
FAKE_BIN = ROOT / "tests" / "fake_bin"
RECORDED = FAKE_BIN / "recorded"


def _env(**extra):
    env = dict(os.environ, PATH=f"{FAKE_BIN}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    for name in ("FAKE_SMI", "FAKE_VLLM_HELP"):
        env.pop(name, None)
    return env | extra


def _install(*args, **env):
    return subprocess.run(["bash", str(SCRIPT), *args], env=_env(**env), capture_output=True,
                          text=True, timeout=120)


def _commands(out):
    return [l[2:] for l in out.stdout.splitlines() if l.startswith("+ ")]


def test_a_575_driver_gets_vllms_cuda_12_9_wheels():
    """575.57.08 reports CUDA 12.9: PyPI's vLLM wheels (CUDA 13 since 0.20) would fail at the
    first kernel; the cu129 build from vLLM's own index, with a cu129 torch, runs."""
    out = _install("--dry-run", FAKE_SMI="575_cuda12.9")
    assert out.returncode == 0, out.stderr
    pip = next(c for c in _commands(out) if "venv-vllm" in c and "install -q vllm" in c)
    version = re.search(r"vllm==([\d.]+)\+cu129", pip).group(1)
    assert f"--extra-index-url https://wheels.vllm.ai/{version}/cu129" in pip
    assert "--extra-index-url https://download.pytorch.org/whl/cu129" in pip
    assert "driver 575.57.08 for CUDA 12.9: vLLM's cu129 wheels" in out.stdout


def test_a_cuda_13_driver_gets_pypis_wheels_within_the_pinned_range():
    """R610 drivers print "KMD Version / CUDA UMD Version" in their banner (sglang #27487)."""
    out = _install("--dry-run", FAKE_SMI="610_cuda13.3")
    assert out.returncode == 0, out.stderr
    commands = _commands(out)
    vllm_env = [c for c in commands if "venv-vllm" in c]
    project = [c for c in commands if "venv-countermem" in c]
    pin = re.search(r"vllm>=([\d.]+),<([\d.]+) --extra-index-url "
                    r"https://download.pytorch.org/whl/cu130", " ".join(vllm_env))
    assert pin, vllm_env
    setup = (ROOT / "setup.py").read_text()
    assert f'"serve": ["vllm>={pin.group(1)},<{pin.group(2)}"]' in setup
    assert pin.group(2) == "0.34"   # the current release line, 0.33.x, is in the range
    assert any(".[llm,solvers,plots,sweep,curves,gpu]" in c for c in project)
    assert not any("vllm" in c.split("venv-countermem")[-1] for c in project)
    assert "launch/serve_vllm.sh" in out.stdout and "countermem_jax.preflight" in out.stdout
    assert "serve_vllm.sh --check-flags" in out.stdout   # the flag check follows the install


def test_the_cu129_release_is_inside_the_pinned_range():
    text = SCRIPT.read_text()
    low = re.search(r"^VLLM_MIN=([\d.]+)", text, re.M).group(1)
    ceiling = re.search(r"^VLLM_CEILING=([\d.]+)", text, re.M).group(1)
    cu129 = re.search(r"^CU129_VERSION=([\d.]+)", text, re.M).group(1)
    as_tuple = lambda v: tuple(int(x) for x in v.split("."))   # noqa: E731
    assert as_tuple(low) <= as_tuple(cu129) < as_tuple(ceiling)


def test_a_driver_no_vllm_wheel_runs_on_is_refused_in_one_line():
    out = _install("--dry-run", FAKE_SMI="550_cuda12.4")
    assert out.returncode == 1 and "+ " not in out.stdout
    assert out.stderr.strip() == (
        "the NVIDIA driver (550.40.07) supports CUDA 12.4; vLLM's wheels need CUDA 12.9 "
        "(driver 575+, vLLM's cu129 index) or 13.0 (driver 580+, PyPI): update the driver")


def _python_without(tmp_path, what):
    """A python3 whose answer to the script's host check says `what` is missing."""
    fake = tmp_path / "python3"
    answer = {"venv": f"0 {sys.base_prefix}/include 1", "headers": "1 /usr/include/none 0"}[what]
    fake.write_text(f"#!/bin/bash\nif [[ \"$*\" == *sysconfig* ]]; then echo '{answer}'; "
                    f"else exec {sys.executable} \"$@\"; fi\n")
    fake.chmod(0o755)
    return str(fake)


def test_missing_venv_support_or_python_headers_are_named_before_the_driver(tmp_path):
    # no nvidia-smi on this PATH: the Python is checked first
    env = dict(PATH=f"{tmp_path}:/usr/bin:/bin")
    out = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--python",
                          _python_without(tmp_path, "venv")], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "cannot make virtual environments" in out.stderr
    assert "python3-venv" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--python",
                          _python_without(tmp_path, "headers")], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "Python.h is missing from /usr/include/none" in out.stderr
    assert "python3-dev" in out.stderr and "nvidia-smi" not in out.stderr


def test_a_host_without_a_c_compiler_is_told_so(tmp_path):
    bin_dir = tmp_path / "bin"   # a PATH with the script's tools and no cc/gcc
    bin_dir.mkdir()
    for tool in ("bash", "sed", "sort", "head", "tr", "wc", "cat", "dirname", "env"):
        path = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True,
                              text=True).stdout.strip()
        (bin_dir / tool).symlink_to(path)
    (bin_dir / "python3").symlink_to(sys.executable)
    (bin_dir / "nvidia-smi").symlink_to(FAKE_BIN / "nvidia-smi")
    out = subprocess.run([str(bin_dir / "bash"), str(SCRIPT), "--dry-run"],
                         env={"PATH": str(bin_dir)}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "no C compiler (cc or gcc)" in out.stderr, out.stderr


def _vllm_env(tmp_path):
    env_dir = tmp_path / "venv-vllm"
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / "bin" / "vllm").symlink_to(FAKE_BIN / "vllm")
    return env_dir


def test_an_installed_vllm_that_lacks_a_flag_is_named_before_any_gpu_is_used(tmp_path):
    env_dir = _vllm_env(tmp_path)
    out = _install("--check-only", "--no-fix-check", "--vllm-env", str(env_dir),
                   FAKE_VLLM_HELP=str(RECORDED / "vllm_serve_help_without_async_scheduling.txt"))
    assert out.returncode == 1
    assert "this vLLM (0.33.0) does not take --async-scheduling" in out.stderr
    ok = _install("--check-only", "--no-fix-check", "--vllm-env", str(env_dir))
    assert ok.returncode == 0, ok.stderr
    assert "vllm serve takes all 9 flags" in ok.stdout and "+ " not in ok.stdout


def test_a_banner_without_a_cuda_version_falls_back_on_the_driver_branch(tmp_path):
    """Some hosts (vGPU guests) print no CUDA version ("Not Found" in `nvidia-smi -q`,
    bigstack-oss/cubecos #312): the driver branch decides. The banner here is the recorded 575
    one with its CUDA field blanked (made up for this case)."""
    banner = (RECORDED / "nvidia_smi_575_cuda12.9.txt").read_text().replace(
        "CUDA Version: 12.9", "CUDA Version: N/A ")
    (tmp_path / "banner.txt").write_text(banner)
    out = _install("--dry-run", FAKE_SMI=str(tmp_path / "banner.txt"))
    assert out.returncode == 0 and "driver 575.57.08 for CUDA 12.9: vLLM's cu129 wheels" in out.stdout
