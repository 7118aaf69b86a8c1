"""launch/serve_vllm.sh against the real huggingface_hub client (a loopback stand-in of the
Hub's HTTP API serving gpt-oss-120b's file list, tests/hub_standin.py) and stand-ins for `vllm`
and `nvidia-smi` (tests/fake_bin; vLLM itself needs GPUs). The `vllm` stand-in runs a small HTTP
server per replica, holds its internal distributed-init port as torch does, prints the help
text of tests/fake_bin/recorded/, and can die after start; `nvidia-smi` prints banners real hosts
printed. launch/install_gpu_host.sh is in tests/test_gpu_host_install.py."""
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

from hub_standin import HubStandIn, gpt_oss_files
from helpers import paper_config

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAKE_BIN = ROOT / "tests" / "fake_bin"
RECORDED = FAKE_BIN / "recorded"
# what vLLM reads from a model folder: config, generation config, tokenizer, chat template, the
# weights and their index
VLLM_LOADS = {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "chat_template.jinja", "model.safetensors.index.json",
              *(f"model-{i:05d}-of-00014.safetensors" for i in range(15))}
DOCS = {".gitattributes", "LICENSE", "README.md", "USAGE_POLICY"}   # 20 kB beside them


def _free_port_block(n, start=18000):
    for base in range(start, 60000, 100):
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


@pytest.fixture
def hub():
    with HubStandIn() as server:
        yield server


def _env(tmp_path, hub=None, **extra):
    # a disk with 500 GB free: the tests never depend on the machine's own free space; python3
    # is this interpreter (its huggingface_hub), as in a vLLM environment
    env = dict(os.environ, PATH=f"{FAKE_BIN}:{pathlib.Path(sys.executable).parent}:"
                                f"{os.environ['PATH']}",
               FAKE_VLLM_LOG_DIR=str(tmp_path), FAKE_DF_FREE_KB=str(500 * 10 ** 6),
               HF_HOME=str(tmp_path / "hf_home"), HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_DISABLE_UPDATE_CHECK="1", PYTHONPATH=str(ROOT))
    for name in ("CUDA_VISIBLE_DEVICES", "HF_TOKEN", "HF_HUB_OFFLINE", "FAKE_VLLM_HELP"):
        env.pop(name, None)
    if hub is not None:
        env["HF_ENDPOINT"] = hub.url
    return env | extra


def _script(port, urls, *args, internal=None):
    # vLLM's internal ports: a free block above the API ports (below them for a high port)
    internal = internal or _free_port_block(800, start=port + 1000 if port < 50000 else 20000)
    return ["bash", str(ROOT / "launch" / "serve_vllm.sh"), "--port", str(port), "--urls-file",
            str(urls), "--stagger", "0.1", "--watch-interval", "0.3", "--internal-port-base",
            str(internal), *args]


def _serve(tmp_path, hub, replicas, *args, **env):
    """Runs serve_vllm.sh until its URL file lists ``replicas`` servers; returns the URL lines,
    the port block and what each fake replica recorded."""
    port = _free_port_block(max(replicas, 1))
    urls = tmp_path / "urls.txt"
    proc = subprocess.Popen(_script(port, urls, *args), cwd=tmp_path,
                            env=_env(tmp_path, hub, **env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 90
        while time.time() < deadline and not urls.exists():
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.3)
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


def test_an_8_gpu_host_gets_4_replicas_of_tp_2_after_one_download(tmp_path, hub):
    lines, port, replicas = _serve(tmp_path, hub, 4, "--max-seqs", "64")
    # each line: the replica's base URL on loopback and what it batches at once
    assert lines == [f"http://127.0.0.1:{port + i}/v1 max_num_seqs=64" for i in range(4)]
    assert [r["gpus"] for r in replicas] == ["0,1", "2,3", "4,5", "6,7"]
    first = replicas[0]
    assert first["args"][:2] == ["serve", "openai/gpt-oss-120b"]
    assert _arg(first, "--tensor-parallel-size") == "2" and _arg(first, "--max-num-seqs") == "64"
    # fetched once before any replica started, each file once; the replicas only read the cache
    fetched = hub.fetched()
    assert len(fetched) == len(set(fetched)) and fetched
    assert all(r["offline"] == "1" for r in replicas)
    # a block of internal ports of its own per replica (VLLM_PORT)
    internal = [int(r["vllm_port"]) for r in replicas]
    assert len(set(internal)) == 4 and all(b - a == 100 for a, b in zip(internal, internal[1:]))


def test_the_download_is_what_vllm_loads_not_the_whole_repository(tmp_path, hub):
    """The repository holds three copies of the weights (196 GB): vLLM loads the top-level
    safetensors (about 65 GB), never original/ or metal/. The real huggingface_hub client
    fetches them from the stand-in; the old command line (`--exclude A B`) asked for a file
    named `metal/*` instead with today's `hf`."""
    _serve(tmp_path, hub, 4)
    fetched = set(hub.fetched())
    assert fetched == VLLM_LOADS | DOCS, fetched ^ (VLLM_LOADS | DOCS)
    sizes = gpt_oss_files()
    assert sum(sizes[f] or 0 for f in fetched) < 70e9
    snapshot = next((tmp_path / "hf_home" / "hub" / "models--openai--gpt-oss-120b"
                     / "snapshots").iterdir())
    assert {p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file()} \
        == fetched


def test_the_real_hf_cli_takes_one_exclude_per_pattern(tmp_path, hub):
    """The command docs/gpu_host.md gives for a manual download, run with the real `hf`."""
    env = _env(tmp_path, hub)
    hf = pathlib.Path(sys.executable).parent / "hf"
    out = subprocess.run([str(hf), "download", "openai/gpt-oss-120b", "--exclude", "original/*",
                          "--exclude", "metal/*"], env=env, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr
    assert set(hub.fetched()) == VLLM_LOADS | DOCS
    hub.requests.clear()
    old = subprocess.run([str(hf), "download", "openai/gpt-oss-120b", "--exclude", "original/*",
                          "metal/*"], env=dict(env, HF_HOME=str(tmp_path / "other")),
                         capture_output=True, text=True, timeout=180)
    assert old.returncode != 0 and "Ignoring `--exclude`" in old.stderr


def _refused(tmp_path, hub, *args, **env):
    port = _free_port_block(4)
    out = subprocess.run(_script(port, tmp_path / "urls.txt", *args), cwd=tmp_path,
                         env=_env(tmp_path, hub, **env), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert not list(tmp_path.glob("vllm_*.log")) and not (tmp_path / "urls.txt").exists()
    return out.stderr


def test_a_name_the_hub_does_not_have_is_told_from_a_login_problem(tmp_path, hub):
    # no token: the Hub answers 401 for a missing repository too, so both causes are named
    err = _refused(tmp_path, hub, "--model", "openai/gpt-oss-120bb")
    assert "download of openai/gpt-oss-120bb failed: " in err
    assert "answered 401" in err and "name is wrong" in err and "hf auth login" in err
    # with a token the Hub says 404: the name
    err = _refused(tmp_path, hub, "--model", "openai/gpt-oss-120bb", HF_TOKEN="hf_valid")
    assert "repository openai/gpt-oss-120bb not found" in err and "(404)" in err
    assert "login" not in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_refused_token_and_a_gated_repository_say_so(tmp_path):
    with HubStandIn(bad_tokens={"hf_revoked"}) as hub:
        err = _refused(tmp_path, hub, HF_TOKEN="hf_revoked")
    assert "refused the token" in err and "(HTTP 401)" in err
    with HubStandIn(gated=True) as hub:
        err = _refused(tmp_path, hub)
    assert "is gated" in err and "accept its terms" in err


def test_a_flag_the_installed_vllm_does_not_take_is_named_before_anything_starts(tmp_path, hub):
    err = _refused(tmp_path, hub,
                   FAKE_VLLM_HELP=str(RECORDED / "vllm_serve_help_without_async_scheduling.txt"))
    assert "does not take --async-scheduling" in err
    assert not hub.requests and not list(tmp_path.glob("*.json"))   # no download, no replica


def test_the_replicas_serve_the_configs_name_on_loopback_with_cached_token_counts(tmp_path, hub):
    model_dir = tmp_path / "weights"   # a local copy: no download, the config's name served
    model_dir.mkdir()
    _, _, replicas = _serve(tmp_path, hub, 4, "--model", str(model_dir))
    for r in replicas:
        assert _arg(r, "--served-model-name") == "openai/gpt-oss-120b"
        assert _arg(r, "--host") == "127.0.0.1" and _arg(r, "--api-key") is None
        assert "--enable-prompt-tokens-details" in r["args"] and "--async-scheduling" in r["args"]
    assert not hub.requests


def test_one_h200_serves_one_replica_of_tp_1_and_the_client_holds_what_it_batches(tmp_path, hub):
    from countermem_jax.backbones import served_urls
    lines, _, replicas = _serve(tmp_path, hub, 1, FAKE_GPUS="1", FAKE_GPU_MEM_MIB="143771")
    assert len(lines) == 1 and replicas[0]["gpus"] == "0"
    assert _arg(replicas[0], "--tensor-parallel-size") == "1"
    kept = tmp_path / "kept_urls.txt"   # the script removes its file when it is stopped
    kept.write_text("\n".join(lines) + "\n")
    served = served_urls.read(str(kept))
    cap = paper_config("spider,react,gptoss").backbone.max_concurrency
    assert served_urls.in_flight_limit(cap, served) == 256 < cap


def test_eight_h200s_serve_eight_replicas_of_tp_1(tmp_path, hub):
    lines, _, replicas = _serve(tmp_path, hub, 8, FAKE_GPU_MEM_MIB="143771")
    assert len(lines) == 8 and [r["gpus"] for r in replicas] == [str(i) for i in range(8)]


def test_visible_devices_are_split_in_their_own_order(tmp_path, hub):
    lines, _, replicas = _serve(tmp_path, hub, 2, "--model", "openai/gpt-oss-20b",
                                "--no-download", CUDA_VISIBLE_DEVICES="5,3")
    assert len(lines) == 2 and [r["gpus"] for r in replicas] == ["5", "3"]  # TP 1 below 120b
    assert not hub.requests and replicas[0]["offline"] is None


def test_an_explicit_layout_wins_over_the_derived_one(tmp_path, hub):
    lines, _, replicas = _serve(tmp_path, hub, 1, "--replicas", "1", "--tp", "4")
    assert len(lines) == 1 and replicas[0]["gpus"] == "0,1,2,3"


def test_a_disk_that_cannot_hold_the_weights_stops_before_the_download(tmp_path, hub):
    err = _refused(tmp_path, hub, FAKE_DF_FREE_KB=str(10 * 10 ** 6), HF_HOME=str(tmp_path / "hf"))
    assert "not enough disk for the weights: free 56 GB more" in err
    assert not hub.requests


def test_a_layout_larger_than_the_visible_gpus_is_refused(tmp_path, hub):
    err = _refused(tmp_path, hub, "--replicas", "3", "--tp", "4")
    assert "3 replicas x TP 4 need 12 GPUs; 8 visible" in err


def test_a_port_in_use_is_refused_before_anything_is_fetched(tmp_path, hub):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run(_script(port, tmp_path / "urls.txt", "--replicas", "1"),
                             cwd=tmp_path, env=_env(tmp_path, hub), capture_output=True,
                             text=True, timeout=60)
    assert out.returncode == 1 and f"port {port} is already in use" in out.stderr
    assert not hub.requests and not list(tmp_path.glob("vllm_*.log"))


def test_another_address_than_loopback_needs_an_api_key(tmp_path, hub):
    args = ["bash", str(ROOT / "launch" / "serve_vllm.sh"), "--host", "0.0.0.0", "--urls-file",
            str(tmp_path / "urls.txt")]
    out = subprocess.run(args, cwd=tmp_path, env=_env(tmp_path, hub), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "--api-key-env" in out.stderr
    lines, _, replicas = _serve(tmp_path, hub, 4, "--host", "0.0.0.0", "--api-key-env",
                                "TEST_KEY", TEST_KEY="s3cret")
    assert all(_arg(r, "--api-key") == "s3cret" for r in replicas) and len(lines) == 4


def test_health_is_polled_where_the_replicas_listen(tmp_path, hub):
    """--host 127.0.0.2: /health is asked there (not on 127.0.0.1, where nothing listens) and
    the URL file names that address."""
    lines, port, _ = _serve(tmp_path, hub, 2, "--host", "127.0.0.2", "--replicas", "2")
    assert lines == [f"http://127.0.0.2:{port + i}/v1 max_num_seqs=256" for i in range(2)]


def test_a_health_check_that_never_answers_times_out(tmp_path, hub):
    """A replica that accepts /health and never answers: each poll gives up after curl's
    --max-time (10 s), so --health-timeout ends the wait instead of one curl hanging forever."""
    port = _free_port_block(1)
    out = subprocess.run(_script(port, tmp_path / "urls.txt", "--replicas", "1",
                                 "--no-download", "--health-timeout", "2"), cwd=tmp_path,
                         env=_env(tmp_path, hub, FAKE_VLLM_HANG_HEALTH="1"), capture_output=True,
                         text=True, timeout=60, start_new_session=True)
    assert out.returncode == 1 and "not healthy after 2s" in out.stderr
    assert not (tmp_path / "urls.txt").exists()


def test_the_fake_server_refuses_a_layout_the_gpus_cannot_hold(tmp_path, hub):
    """TP 1 on an 80 GB H100 with 60% of its memory for vLLM: the 65 GB of weights do not fit,
    and the replica's start fails as vLLM's would; the URL file is never written."""
    port = _free_port_block(1)
    out = subprocess.run(_script(port, tmp_path / "urls.txt", "--replicas", "1", "--tp", "1",
                                 "--gpu-mem", "0.6"), cwd=tmp_path, env=_env(tmp_path, hub),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "No available memory for the cache blocks" in out.stderr
    assert not (tmp_path / "urls.txt").exists()


def _run_until_exit(tmp_path, hub, port, *args, timeout=90, **env):
    urls = tmp_path / "urls.txt"
    proc = subprocess.Popen(_script(port, urls, *args), cwd=tmp_path,
                            env=_env(tmp_path, hub, **env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    listed = []
    try:
        deadline = time.time() + timeout
        while proc.poll() is None and time.time() < deadline:
            if urls.exists():
                listed.append(urls.read_text())
            time.sleep(0.1)
        assert proc.poll() is not None, "serve_vllm.sh kept running"
        return proc.returncode, proc.stdout.read(), proc.stderr.read(), listed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def test_a_replica_that_dies_after_start_ends_the_script_with_its_log_and_url(tmp_path, hub):
    port = _free_port_block(3)
    rc, out, err, listed = _run_until_exit(tmp_path, hub, port, "--replicas", "3",
                                           FAKE_VLLM_EXIT_AFTER=f"{port + 1}:6")
    assert rc == 1, out + err
    assert any(f"http://127.0.0.1:{port + 1}/v1 " in text for text in listed)   # was served
    assert f"replica 1 (http://127.0.0.1:{port + 1}/v1" in err and "exited with status 1" in err
    assert "illegal memory access" in err   # the tail of its log
    urls = tmp_path / "urls.txt"
    assert not urls.exists() or f":{port + 1}/" not in urls.read_text()
    time.sleep(1)   # the others were stopped: their ports are free again
    for p in (port, port + 2):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", p)) != 0


def test_replicas_started_together_do_not_race_for_the_internal_port(tmp_path, hub):
    """Each replica holds its distributed-init port (as torch's TCPStore does). Without
    VLLM_PORT every replica of the stand-in takes the same one and all but one exit with
    EADDRINUSE, the worst case of vLLM's race; with a block per replica four start side by side,
    and a port of a block held by another program only moves that replica up its block."""
    lines, _, replicas = _serve(tmp_path, hub, 4, "--stagger", "0")
    assert len(lines) == 4 and len({r["internal_port"] for r in replicas}) == 4
    port = _free_port_block(2)
    internal = _free_port_block(200, start=port + 1000)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", internal + 100))   # replica 1's first internal port
        busy.listen()
        lines, _, replicas = _serve(tmp_path, hub, 2, "--replicas", "2",
                                    "--internal-port-base", str(internal))
    assert len(lines) == 2
    assert [r["internal_port"] for r in replicas] == [internal, internal + 101]
