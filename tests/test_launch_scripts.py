"""launch/serve_vllm.sh against a stand-in `vllm` executable (vLLM itself needs GPUs)."""
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


def test_serve_vllm_starts_replicas_per_gpu_group_and_writes_urls(tmp_path):
    port = _free_port_block(2)
    env = dict(os.environ, PATH=f"{ROOT / 'tests' / 'fake_bin'}:{os.environ['PATH']}",
               FAKE_VLLM_LOG_DIR=str(tmp_path))
    urls = tmp_path / "urls.txt"
    proc = subprocess.Popen(["bash", str(ROOT / "launch" / "serve_vllm.sh"), "--tp", "2",
                             "--replicas", "2", "--port", str(port), "--max-seqs", "64",
                             "--urls-file", str(urls)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (urls.exists() and
                                               len(urls.read_text().splitlines()) == 2):
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.5)
        lines = urls.read_text().splitlines()
        assert [l.rsplit(":", 1)[1] for l in lines] == [f"{port}/v1", f"{port + 1}/v1"]
        first = json.loads((tmp_path / f"{port}.json").read_text())
        second = json.loads((tmp_path / f"{port + 1}.json").read_text())
        assert first["gpus"] == "0,1" and second["gpus"] == "2,3"
        assert first["args"][:2] == ["serve", "openai/gpt-oss-120b"]
        assert "--tensor-parallel-size" in first["args"] and "64" in first["args"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
