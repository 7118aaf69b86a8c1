"""The sweep on a real two-node Ray cluster on loopback.

A head node advertising 2 LLM slots and a worker node advertising 3, each pointed (through
``COUNTERMEM_LLM_URLS`` in its own environment) at its own scripted OpenAI-format server, run a
sweep of 2 benchmarks x 2 methods (CounterMem, the base agent) x 2 selector seeds. While it runs,
the worker process training selector seed 0 on one benchmark is killed (SIGKILL). The sweep must
finish, the killed phase must resume from its log, and every metric, task outcome, transition and
store must equal those of the same sweep run serially in one process with ``--local``; no server
may ever have more requests in flight than its node advertised. Everything stays on 127.0.0.1.
"""
import json
import os
import pathlib
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time

import pytest

# Read by Ray when it is imported: no usage reports, and every address on loopback.
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ray = pytest.importorskip("ray", reason="Ray is the optional `sweep` extra: "
                                        "pip install -e '.[sweep]'")

import sweep_fixture  # noqa: E402
import sweep_helpers  # noqa: E402
from countermem_jax.runtime.runlog import RunLog  # noqa: E402
from countermem_jax.sweep import run_sweep  # noqa: E402

SLOTS = {"head": 2, "worker": 3}
TESTS = pathlib.Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill_training_of_seed0(root: pathlib.Path, stop: threading.Event, killed: dict) -> None:
    """SIGKILLs the process that trains selector seed 0 on sweep_people once it has logged a
    transition (the phase lock's owner file names the process)."""
    while not stop.is_set():
        for wd in root.glob("sweep_people/*/countermem-*"):
            log, owner = wd / "log.jsonl", wd / ".locks" / "train_selector.owner"
            if not (log.is_file() and owner.is_file()):
                continue
            seeds = [json.loads(x).get("seed") for x in log.read_text().splitlines()
                     if '"event": "transition"' in x]
            if 0 not in seeds:
                continue
            try:
                pid = json.loads(owner.read_text())["pid"]
            except (OSError, ValueError, KeyError):
                continue
            assert pid != os.getpid()   # the phases run in Ray's workers, never here
            os.kill(pid, signal.SIGKILL)
            killed.update(pid=pid, workdir=wd, transitions=seeds.count(0))
            return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep_ray")
    ray_tmp = pathlib.Path(tempfile.mkdtemp(prefix="cmray", dir="/tmp"))  # short socket paths
    (ray_tmp / "ray").mkdir()
    env = {"RAY_TMPDIR": str(ray_tmp),
           "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS),
                                          os.environ.get("PYTHONPATH", "")])}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        # the same sweep, serially in this process
        local_file = sweep_helpers.write_sweep(tmp, tmp / "local")
        with sweep_fixture.ScriptedServer(name="local") as server:
            mp.setenv("COUNTERMEM_LLM_URLS", server.base_url)
            local = run_sweep(sweep_helpers.load_sweep(local_file), local=True, report=False,
                              echo=lambda line: None)
        mp.delenv("COUNTERMEM_LLM_URLS")
        # on Ray: two nodes, each with its own server and slots
        ray_file = sweep_helpers.write_sweep(tmp, tmp / "ray")
        node = dict(num_cpus=2, object_store_memory=100 * 1024 * 1024, include_dashboard=False,
                    node_ip_address="127.0.0.1")
        lines, killed, stop = [], {}, threading.Event()
        from ray.cluster_utils import Cluster
        # sweep_people's training questions are slow, so its training can be killed midway
        slow = {sweep_fixture.question("people", "age", b): 0.3 for b in (45, 35)}
        with sweep_fixture.ScriptedServer(latency_s=0.05, name="head", slow=slow) as head, \
                sweep_fixture.ScriptedServer(latency_s=0.05, name="worker", slow=slow) as worker:
            cluster = Cluster(initialize_head=True, head_node_args=dict(
                node, gcs_server_port=_free_port(), temp_dir=str(ray_tmp / "ray"),
                resources={"llm_slots": SLOTS["head"]},
                env_vars={"COUNTERMEM_LLM_URLS": head.base_url}))
            try:
                cluster.add_node(**node, resources={"llm_slots": SLOTS["worker"]},
                                 env_vars={"COUNTERMEM_LLM_URLS": worker.base_url})
                ray.init(address=cluster.address, log_to_driver=False)
                killer = threading.Thread(target=_kill_training_of_seed0,
                                          args=(tmp / "ray", stop, killed), daemon=True)
                killer.start()
                outcome = run_sweep(sweep_helpers.load_sweep(ray_file), report=False,
                                    echo=lines.append)
            finally:
                stop.set()
                ray.shutdown()
                cluster.shutdown()
                shutil.rmtree(ray_tmp, ignore_errors=True)
            servers = {"head": head, "worker": worker}
            yield dict(tmp=tmp, local=local, outcome=outcome, lines=lines, killed=killed,
                       servers=servers)


def test_sweep_on_ray_equals_the_serial_local_sweep(sweeps):
    assert sweeps["local"].ok, sweeps["local"].errors
    assert sweeps["outcome"].ok, sweeps["outcome"].errors
    assert set(sweeps["outcome"].states.values()) == {"done"}
    on_ray = sweep_helpers.results(sweeps["tmp"] / "ray")
    serial = sweep_helpers.results(sweeps["tmp"] / "local")
    # 2 benchmarks x (CounterMem, base agent); CounterMem over seeds 0 and 1
    assert len(serial) == 4 and sorted(on_ray) == sorted(serial)
    cm = [v for k, v in serial.items() if "/countermem-" in k]
    assert all(v["seeds"] == ["0", "1"] and v["countermem"] > v["base"] for v in cm)
    differing = {(wd, field): (on_ray[wd][field], serial[wd][field])
                 for wd in serial for field in serial[wd] if on_ray[wd][field] != serial[wd][field]}
    assert not differing
    assert any(line.startswith("[sweep ") and "tasks finished" in line for line in sweeps["lines"])


def test_killed_worker_resumes_its_phase_without_duplicates(sweeps):
    killed = sweeps["killed"]
    assert killed, "the training of seed 0 was never seen running"
    log = RunLog(killed["workdir"] / "log.jsonl")
    starts = [e for e in log.events("seed_start") if e["seed"] == 0]
    assert len(starts) == 2 and starts[1]["decisions_done"] >= 1   # resumed from its log
    transitions = [(t["seed"], t["episode"]) for t in log.events("transition")]
    ends = [(e["run"], e["task_id"]) for e in log.events("task_end")]
    assert len(set(ends)) == len(ends)
    serial = sweep_helpers.results(sweeps["tmp"] / "local")
    name = str(killed["workdir"].relative_to(sweeps["tmp"] / "ray"))
    assert sorted(transitions) == sorted((t[0], t[1]) for t in serial[name]["transitions"])
    store = [json.loads(x) for x in
             (killed["workdir"] / "store_frozen.jsonl").read_text().splitlines()[1:]]
    assert len({r["record_id"] for r in store}) == len(store) >= 1


def test_servers_never_exceed_the_slots_their_node_advertised(sweeps):
    for node, server in sweeps["servers"].items():
        assert server.requests, f"the {node} node's server got no request"
        assert 1 <= server.peak_in_flight <= SLOTS[node], (node, server.peak_in_flight)
        assert not server.unscripted
    markers = [json.loads(p.read_text()) for p in
               (sweeps["tmp"] / "ray").glob("*/*/*/.sweep/*.done.json")]
    urls = {s.base_url for s in sweeps["servers"].values()}
    assert markers and all(m["base_urls"] in urls for m in markers)
