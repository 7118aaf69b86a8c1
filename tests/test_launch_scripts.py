"""launch/serve_vllm.sh and launch/install_gpu_host.sh against stand-ins for `vllm`, the Hugging
Face CLI and `nvidia-smi` (tests/fake_bin; vLLM itself needs GPUs, and tests never reach the hub).
The stand-ins model the host: the hub's file list of gpt-oss-120b, the GPUs' memory, a server
that refuses a layout the GPUs cannot hold, a model name other than the served one, a bad key."""
import json
import os
import pathlib
import signal
import socket
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _free_port_block(n):
    for base in range(18000, 30000, 50):
        ok = True
        for p in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free ports")


def _env(tmp_path, **extra):
    # a disk with 500 GB free: the tests never depend on the machine's own free space
    env = dict(os.environ, PATH=f"{ROOT / 'tests' / 'fake_bin'}:{os.environ['PATH']}",
               FAKE_VLLM_LOG_DIR=str(tmp_path), FAKE_HF_LOG=str(tmp_path / "hf.jsonl"),
               FAKE_DF_FREE_KB=str(500 * 10 ** 6), HF_HOME=str(tmp_path / "hf_home"))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env | extra


def _serve(tmp_path, replicas, *args, **env):
    """Runs serve_vllm.sh until its URL file lists ``replicas`` servers; returns the URL lines,
    the port block and what each fake replica recorded."""
    port = _free_port_block(max(replicas, 1))
    urls = tmp_path / "urls.txt"
    proc = subprocess.Popen(["bash", str(ROOT / "launch" / "serve_vllm.sh"), "--port", str(port),
                             "--urls-file", str(urls), *args], cwd=tmp_path,
                            env=_env(tmp_path, **env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not urls.exists():
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.5)
        lines = urls.read_text().splitlines()
        recorded = [json.loads((tmp_path / f"{port + i}.json").read_text())
                    for i in range(len(lines))]
        return lines, port, recorded
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def _arg(replica, flag):
    args = replica["args"]
    return args[args.index(flag) + 1] if flag in args else None


def test_an_8_gpu_host_gets_4_replicas_of_tp_2_after_one_download(tmp_path):
    lines, port, replicas = _serve(tmp_path, 4, "--max-seqs", "64")
    # each line: the replica's base URL on loopback and what it batches at once
    assert lines == [f"http://127.0.0.1:{port + i}/v1 max_num_seqs=64" for i in range(4)]
    assert [r["gpus"] for r in replicas] == ["0,1", "2,3", "4,5", "6,7"]
    first = replicas[0]
    assert first["args"][:2] == ["serve", "openai/gpt-oss-120b"]
    assert _arg(first, "--tensor-parallel-size") == "2" and _arg(first, "--max-num-seqs") == "64"
    # fetched once before any replica started; the replicas only read the cache
    hf_calls = (tmp_path / "hf.jsonl").read_text().splitlines()
    assert len(hf_calls) == 1 and json.loads(hf_calls[0])["args"][:2] == [
        "download", "openai/gpt-oss-120b"]
    assert all(r["offline"] == "1" for r in replicas)


def test_the_download_is_what_vllm_loads_not_the_whole_repository(tmp_path):
    """The repository holds three copies of the weights (196 GB): vLLM loads the top-level
    safetensors (about 65 GB), never original/ or metal/."""
    _serve(tmp_path, 4)
    fetched = json.loads((tmp_path / "hf.jsonl").read_text())
    assert fetched["bytes"] < 70e9, fetched["bytes"]
    assert not [f for f in fetched["files"] if f.startswith(("original/", "metal/"))]
    shards = [f for f in fetched["files"] if f.endswith(".safetensors")]
    assert len(shards) == 15 and {"config.json", "tokenizer.json", "chat_template.jinja",
                                  "model.safetensors.index.json"} <= set(fetched["files"])


def test_the_replicas_serve_the_configs_name_on_loopback_with_cached_token_counts(tmp_path):
    model_dir = tmp_path / "weights"   # a local copy: no download, the config's name served
    model_dir.mkdir()
    _, _, replicas = _serve(tmp_path, 4, "--model", str(model_dir))
    for r in replicas:
        assert _arg(r, "--served-model-name") == "openai/gpt-oss-120b"
        assert _arg(r, "--host") == "127.0.0.1" and _arg(r, "--api-key") is None
        assert "--enable-prompt-tokens-details" in r["args"] and "--async-scheduling" in r["args"]


def test_one_h200_serves_one_replica_of_tp_1_and_the_client_holds_what_it_batches(tmp_path):
    from countermem_jax.backbones import served_urls
    from countermem_jax.protocol import config_defaults
    lines, _, replicas = _serve(tmp_path, 1, FAKE_GPUS="1", FAKE_GPU_MEM_MIB="143771")
    assert len(lines) == 1 and replicas[0]["gpus"] == "0"
    assert _arg(replicas[0], "--tensor-parallel-size") == "1"
    served = served_urls.read(str(tmp_path / "urls.txt"))
    cap = config_defaults.setting_config("spider", "react", "gptoss").backbone.max_concurrency
    assert served_urls.in_flight_limit(cap, served) == 256 < cap


def test_eight_h200s_serve_eight_replicas_of_tp_1(tmp_path):
    lines, _, replicas = _serve(tmp_path, 8, FAKE_GPU_MEM_MIB="143771")
    assert len(lines) == 8 and [r["gpus"] for r in replicas] == [str(i) for i in range(8)]


def test_visible_devices_are_split_in_their_own_order(tmp_path):
    lines, _, replicas = _serve(tmp_path, 2, "--model", "openai/gpt-oss-20b", "--no-download",
                                CUDA_VISIBLE_DEVICES="5,3")
    assert len(lines) == 2 and [r["gpus"] for r in replicas] == ["5", "3"]  # TP 1 below 120b
    assert not (tmp_path / "hf.jsonl").exists() and replicas[0]["offline"] is None


def test_an_explicit_layout_wins_over_the_derived_one(tmp_path):
    lines, _, replicas = _serve(tmp_path, 1, "--replicas", "1", "--tp", "4")
    assert len(lines) == 1 and replicas[0]["gpus"] == "0,1,2,3"


def _refused(tmp_path, *args, **env):
    out = subprocess.run(["bash", str(ROOT / "launch" / "serve_vllm.sh"), "--port",
                          str(_free_port_block(4)), "--urls-file", str(tmp_path / "urls.txt"),
                          *args], cwd=tmp_path, env=_env(tmp_path, **env), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1, out.stdout + out.stderr
    assert not list(tmp_path.glob("vllm_*.log")) and not (tmp_path / "urls.txt").exists()
    return out.stderr


def test_a_failed_download_starts_no_replica(tmp_path):
    assert "download of openai/gpt-oss-120b failed" in _refused(tmp_path, FAKE_HF_FAIL="1")


def test_a_disk_that_cannot_hold_the_weights_stops_before_the_download(tmp_path):
    err = _refused(tmp_path, FAKE_DF_FREE_KB=str(10 * 10 ** 6), HF_HOME=str(tmp_path / "hf"))
    assert "not enough disk for the weights: free 56 GB more" in err
    assert not (tmp_path / "hf.jsonl").exists()


def test_a_layout_larger_than_the_visible_gpus_is_refused(tmp_path):
    err = _refused(tmp_path, "--replicas", "3", "--tp", "4")
    assert "3 replicas x TP 4 need 12 GPUs; 8 visible" in err


def test_a_port_in_use_is_refused_before_anything_is_fetched(tmp_path):
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run(["bash", str(ROOT / "launch" / "serve_vllm.sh"), "--port", str(port),
                              "--replicas", "1", "--urls-file", str(tmp_path / "urls.txt")],
                             cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                             timeout=60)
    assert out.returncode == 1 and f"port {port} is already in use" in out.stderr
    assert not (tmp_path / "hf.jsonl").exists() and not list(tmp_path.glob("vllm_*.log"))


def test_another_address_than_loopback_needs_an_api_key(tmp_path):
    args = ["bash", str(ROOT / "launch" / "serve_vllm.sh"), "--host", "0.0.0.0", "--urls-file",
            str(tmp_path / "urls.txt")]
    out = subprocess.run(args, cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "--api-key-env" in out.stderr
    lines, _, replicas = _serve(tmp_path, 4, "--host", "0.0.0.0", "--api-key-env", "TEST_KEY",
                                TEST_KEY="s3cret")
    assert all(_arg(r, "--api-key") == "s3cret" for r in replicas) and len(lines) == 4


def test_the_fake_server_refuses_a_layout_the_gpus_cannot_hold(tmp_path):
    """TP 1 on an 80 GB H100 with 60% of its memory for vLLM: the 65 GB of weights do not fit,
    and the replica's start fails as vLLM's would; the URL file is never written."""
    out = subprocess.run(["bash", str(ROOT / "launch" / "serve_vllm.sh"), "--port",
                          str(_free_port_block(1)), "--replicas", "1", "--tp", "1", "--gpu-mem",
                          "0.6", "--urls-file", str(tmp_path / "urls.txt")], cwd=tmp_path,
                         env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "No available memory for the cache blocks" in out.stderr
    assert not (tmp_path / "urls.txt").exists()


def test_install_gpu_host_dry_run_makes_two_environments_and_pins_vllm(tmp_path):
    """vLLM in an environment of its own, pinned below a ceiling (the same pin as the `serve`
    extra); the project's environment gets the `gpu` extra and no vLLM; the next command is
    printed. A driver older than CUDA 12.9 is refused before anything is installed."""
    import re
    script = ROOT / "launch" / "install_gpu_host.sh"
    out = subprocess.run(["bash", str(script), "--dry-run"], env=_env(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    commands = [l[2:] for l in out.stdout.splitlines() if l.startswith("+ ")]
    vllm_env = [c for c in commands if "venv-vllm" in c]
    project = [c for c in commands if "venv-countermem" in c]
    pin = re.search(r"vllm>=([\d.]+),<([\d.]+)", " ".join(vllm_env))
    assert pin, vllm_env
    setup = (ROOT / "setup.py").read_text()
    assert f'"serve": ["vllm>={pin.group(1)},<{pin.group(2)}"]' in setup
    assert any(".[llm,solvers,plots,sweep,curves,gpu]" in c for c in project)
    assert not any("vllm" in c.split("venv-countermem")[-1] for c in project)
    assert "launch/serve_vllm.sh" in out.stdout and "countermem_jax.preflight" in out.stdout
    old = subprocess.run(["bash", str(script), "--dry-run"], capture_output=True, text=True,
                         env=_env(tmp_path, FAKE_CUDA_VERSION="12.4"), timeout=60)
    assert old.returncode == 1 and "CUDA >= 12.9" in old.stderr and "+ " not in old.stdout
