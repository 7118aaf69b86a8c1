"""The real CPU backbone (llama.cpp + the pinned Qwen2.5-Coder-0.5B GGUF), in-process and served
by launch/serve_cpu.sh.

Runs when the ``cpu`` extra and the model chunk packages are installed (CI installs both).
"""
import os
import socket
import subprocess
import time

import pytest

from countermem_jax import domains
from countermem_jax.backbones import gguf
from countermem_jax.backbones.base import SamplingParams

llama_cpp = pytest.importorskip("llama_cpp", reason="cpu extra (llama-cpp-python) not installed")

SQL_PROMPT = [{"role": "system", "content": "You write SQLite queries. Answer with one query in a "
                                            "```sql code block."},
              {"role": "user", "content": "Schema: CREATE TABLE singer(name text, age int);\n"
                                          "Question: What are the names of singers aged at least 30?"}]


@pytest.fixture(scope="module")
def model_path():
    try:
        return gguf.default_model_path()
    except gguf.ModelFileError as err:
        pytest.skip(str(err))


def test_joined_model_file_is_verified(model_path):
    assert model_path.stat().st_size == gguf.GGUF_SIZE
    assert model_path.with_suffix(".verified").read_text().startswith(gguf.GGUF_SHA256)


def test_in_process_model_answers_sql_the_parser_accepts(model_path):
    from countermem_jax.backbones.llama_cpp_backbone import LlamaCppBackbone
    backbone = LlamaCppBackbone(model_path, n_ctx=1024)
    result = backbone.chat_sync(SQL_PROMPT, SamplingParams(max_tokens=60))
    sql = domains.SQL.parse_action(result.text)
    assert sql.upper().startswith("SELECT") and "singer" in sql.lower()
    assert result.usage.prompt_tokens > 20 and result.usage.completion_tokens > 0


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_served_model_answers_through_the_http_client(model_path):
    pytest.importorskip("uvicorn", reason="llama-cpp-python[server] not installed")
    from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone
    port = _free_port()
    script = os.path.join(os.path.dirname(__file__), "..", "launch", "serve_cpu.sh")
    proc = subprocess.Popen(["bash", script, "--port", str(port), "--ctx", "1024"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import urllib.error
        import urllib.request
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        else:
            pytest.fail("llama.cpp server did not come up")
        client = OpenAICompatibleBackbone(f"http://127.0.0.1:{port}/v1", "local", timeout_s=120)
        result = client.chat_sync(SQL_PROMPT, SamplingParams(max_tokens=60))
        assert domains.SQL.parse_action(result.text).upper().startswith("SELECT")
        assert result.usage.source == "server" and result.usage.completion_tokens > 0
    finally:
        proc.terminate()
        proc.wait(30)
