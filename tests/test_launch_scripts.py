"""launch/serve_vllm.sh against stand-ins for `vllm`, the Hugging Face CLI and `nvidia-smi`
(tests/fake_bin; vLLM itself needs GPUs, and tests never reach the hub)."""
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
    env = dict(os.environ, PATH=f"{ROOT / 'tests' / 'fake_bin'}:{os.environ['PATH']}",
               FAKE_VLLM_LOG_DIR=str(tmp_path), FAKE_HF_LOG=str(tmp_path / "hf.jsonl"))
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


def test_an_8_gpu_host_gets_4_replicas_of_tp_2_after_one_download(tmp_path):
    lines, port, replicas = _serve(tmp_path, 4, "--max-seqs", "64")
    assert [l.rsplit(":", 1)[1] for l in lines] == [f"{port + i}/v1" for i in range(4)]
    assert [r["gpus"] for r in replicas] == ["0,1", "2,3", "4,5", "6,7"]
    first = replicas[0]["args"]
    assert first[:2] == ["serve", "openai/gpt-oss-120b"]
    assert first[first.index("--tensor-parallel-size") + 1] == "2"
    assert first[first.index("--max-num-seqs") + 1] == "64"
    # fetched once before any replica started; the replicas only read the cache
    hf_calls = (tmp_path / "hf.jsonl").read_text().splitlines()
    assert [json.loads(c) for c in hf_calls] == [["download", "openai/gpt-oss-120b"]]
    assert all(r["offline"] == "1" for r in replicas)


def test_visible_devices_are_split_in_their_own_order(tmp_path):
    lines, _, replicas = _serve(tmp_path, 2, "--model", "openai/gpt-oss-20b", "--no-download",
                                CUDA_VISIBLE_DEVICES="5,3", FAKE_GPUS="0")
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


def test_a_layout_larger_than_the_visible_gpus_is_refused(tmp_path):
    err = _refused(tmp_path, "--replicas", "3", "--tp", "4")
    assert "3 replicas x TP 4 need 12 GPUs; 8 visible" in err
