"""The whole launch path of docs/gpu_host.md, from a bare host to a sweep, against the stand-ins
of tests/fake_bin (one H200: `nvidia-smi`, `vllm`), the real huggingface_hub client talking to a
loopback stand-in of the Hub (tests/hub_standin.py) and loopback servers, every step under
`ulimit -n 1024` (a common default): the install script (dry run), serve_vllm.sh, the preflight,
then a sweep whose served cell runs the three phases at a tiny size on the served replica while
its hosted cell keeps its own endpoint."""
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import sweep_fixture
from hub_standin import HubStandIn, gpt_oss_files

REPO = pathlib.Path(__file__).resolve().parent.parent

RUN_CONFIG = '''"""The sweep fixture as the gpt-oss settings are set: served on the host (a URL file, the
name serve_vllm.sh serves), or a hosted API (URLs of its own, a key in the environment)."""
import sweep_fixture


def get_config(arg="sweep_people,served"):
    benchmark, backbone = arg.split(",")
    c = sweep_fixture.get_config(benchmark)
    if backbone == "served":
        c.backbone.update(base_urls="vllm_urls.txt", model="openai/gpt-oss-120b")
    else:
        c.backbone.update(base_urls={hosted!r}, api_key_env="HOSTED_TEST_KEY")
    return c
'''

SWEEP = '''from countermem_jax.sweep.spec import default_sweep


def get_config():
    c = default_sweep()
    c.root = {root!r}
    c.benchmarks = ("sweep_people",)
    c.backbones = ("served", "hosted")
    c.methods = ("countermem",)
    c.seeds = (0,)
    c.run_config = {run_config!r}
    c.overrides = {{"data": {{"data_dir": {data!r}}}, "splits": {{"manifest": {manifest!r}}}}}
    c.imports = ("sweep_fixture",)
    c.cpus.update(build_memory=1.0, train_selector=1.0, evaluate=1.0)
    c.report = False
    return c
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sh(command: str, cwd, env, timeout=240) -> subprocess.CompletedProcess:
    """``command`` in bash with the open-file limit of a common default host."""
    return subprocess.run(["bash", "-c", f"ulimit -n 1024; {command}"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_bare_h200_host_to_a_sweep_with_one_hosted_cell(tmp_path):
    with HubStandIn() as hub:
        _bare_h200_host_to_a_sweep(tmp_path, hub)
    assert sum(gpt_oss_files()[f] or 0 for f in hub.fetched()) < 70e9   # not the 196 GB


def _bare_h200_host_to_a_sweep(tmp_path, hub):
    env = dict(os.environ, PATH=f"{REPO / 'tests' / 'fake_bin'}:{pathlib.Path(sys.executable).parent}"
                                f":{os.environ['PATH']}", HF_ENDPOINT=hub.url,
               HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_UPDATE_CHECK="1",
               PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]),
               FAKE_GPUS="1", FAKE_GPU_MEM_MIB="143771",
               FAKE_VLLM_RESPONDER="sweep_fixture:vllm_reply", HOSTED_TEST_KEY="k",
               HF_HOME=str(tmp_path / "hf_home"), FAKE_DF_FREE_KB=str(500 * 10 ** 6))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop("COUNTERMEM_LLM_URLS", None)
    py = sys.executable
    # 1. the two environments (dry run: the commands, the driver check)
    install = _sh(f"bash {REPO}/launch/install_gpu_host.sh --dry-run", tmp_path, env)
    assert install.returncode == 0 and "next: serve the model" in install.stdout, install.stderr
    # 2. the server: one H200, one replica of TP 1, the weights fetched once
    port = _free_port()
    serve = subprocess.Popen(["bash", "-c", f"ulimit -n 1024; exec bash {REPO}/launch/"
                              f"serve_vllm.sh --port {port} --max-seqs 8 --internal-port-base {port + 1000}"], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    urls = tmp_path / "vllm_urls.txt"
    try:
        deadline = time.time() + 60
        while not urls.exists():
            assert serve.poll() is None and time.time() < deadline, serve.stdout.read()
            time.sleep(0.3)
        assert urls.read_text() == f"http://127.0.0.1:{port}/v1 max_num_seqs=8\n"
        with sweep_fixture.ScriptedServer(name="hosted") as hosted:
            (tmp_path / "run_config.py").write_text(RUN_CONFIG.format(hosted=hosted.base_url))
            # 3. the preflight, from the folder of the (relative) URL file
            pre = _sh(f"{py} -m countermem_jax.preflight --config=run_config.py:sweep_people,"
                      "served --duration_s=1", tmp_path, env)
            assert "at concurrency 8 " in pre.stdout, pre.stdout + pre.stderr  # what it batches
            rows = [l.split() for l in pre.stdout.splitlines() if l.startswith("DRAFT_ACTION")]
            assert rows and int(rows[0][7]) > 0   # cached prompt tokens reach the ledger
            # 4. the sweep: the served cell on the host's replica, the hosted cell on its own
            data = tmp_path / "data"
            data.mkdir()
            manifest = sweep_fixture.write_manifest(tmp_path / "manifest.json")
            (tmp_path / "sweep.py").write_text(SWEEP.format(
                root=str(tmp_path / "root"), data=str(data), manifest=str(manifest),
                run_config=str(tmp_path / "run_config.py") + ":{benchmark},{backbone}"))
            dry = _sh(f"{py} -m countermem_jax.sweep --sweep=sweep.py --dry_run", tmp_path, env)
            assert dry.returncode == 0 and "own-endpoint" in dry.stdout, dry.stderr
            run = _sh(f"COUNTERMEM_LLM_URLS={urls} {py} -m countermem_jax.sweep --sweep=sweep.py "
                      "--local", tmp_path, env)
            assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
            assert hosted.requests, "the hosted cell never reached its endpoint"
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(30)
    markers = [json.loads(p.read_text()) for p in (tmp_path / "root").rglob("*.done.json")]
    by_cell = {}
    for m in markers:
        by_cell.setdefault("served" if "react_served" in m["run"] else "hosted", set()).add(
            m["base_urls"])
    assert by_cell == {"served": {str(urls)}, "hosted": {hosted.base_url}}
    assert len(markers) == 6   # build, train, evaluate of each cell
