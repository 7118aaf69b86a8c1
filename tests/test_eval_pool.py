"""Evaluation over a real loopback HTTP server: all runs in one pool, shared drafts computed once
(phases/evaluate.py, backbones/cache.py single flight, benchmarks/scripted_sql.py)."""
import asyncio
import contextlib
import json
import urllib.request

from countermem_jax import experiment
from countermem_jax.method.agents import Agent
from countermem_jax.backbones.cache import CachedBackbone
from benchmarks.testing.openai_server import LocalOpenAIServer
from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone
from helpers import config_module, cpu_config, default_config, paper_config
from countermem_jax.domains.sql import SQL
from benchmarks import scripted_sql

N_BUILD, N_EVAL = 4, 10


def _stats(srv, reset=False):
    root = srv.base_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{root}/stats{'?reset=1' if reset else ''}") as r:
        return json.loads(r.read())


def test_the_server_scripts_replies_and_reports_its_peak_in_flight():
    with LocalOpenAIServer(latency_s=0.05, responder=lambda req: "OK " + req["model"]) as srv:
        client = OpenAICompatibleBackbone(srv.base_url, "m1", max_concurrency=4)

        async def burst():
            try:
                return await asyncio.gather(
                    *[client.chat([{"role": "user", "content": str(i)}]) for i in range(8)])
            finally:
                await client.aclose()
        replies = asyncio.run(burst())
        assert {r.text for r in replies} == {"OK m1"}
        assert _stats(srv, reset=True) == {"requests": 8, "peak_in_flight": 4, "in_flight": 0}
        assert _stats(srv) == {"requests": 0, "peak_in_flight": 0, "in_flight": 0}


def test_a_request_whose_client_has_gone_leaves_the_servers_in_flight_count():
    """A killed client's request (its connection closed before the reply) is not counted with
    the requests that arrive after it, as vLLM aborts it."""
    import socket
    import time
    with LocalOpenAIServer(responder=lambda req: "OK") as srv:
        srv.script.append("slow:1.0")
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
        host, port = srv.base_url.split("//", 1)[1].split("/", 1)[0].split(":")
        gone = socket.create_connection((host, int(port)))
        gone.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        while _stats(srv)["in_flight"] == 0:
            time.sleep(0.01)
        gone.close()
        time.sleep(0.1)
        client = OpenAICompatibleBackbone(srv.base_url, "m", max_concurrency=1)

        async def one():
            try:
                return await client.chat([{"role": "user", "content": "y"}])
            finally:
                await client.aclose()
        assert asyncio.run(one()).text == "OK"
        assert _stats(srv)["peak_in_flight"] == 1


def _config(tmp_path, concurrency):
    tasks, _, _ = scripted_sql.people_tasks(N_BUILD + N_EVAL, tmp_path)
    manifest = {"build": [t.task_id for t in tasks[:N_BUILD]], "train": [], "validation": [],
                "eval": [t.task_id for t in tasks[N_BUILD:]]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    cfg = default_config()
    cfg.splits.update(manifest=str(tmp_path / "manifest.json"), group_by_reference=False)
    cfg.agent.max_attempts = 2
    cfg.eval.update(selector="always_top1", concurrency=concurrency)
    return cfg


@contextlib.contextmanager
def _built(tmp_path, bench, cfg):
    """A loopback server scripting ``bench``'s tasks (50 ms a reply) and the workdir ``wd``
    built against it; yields the server and a factory of cached backbones on it by cache name."""
    with LocalOpenAIServer(latency_s=0.05,
                           responder=scripted_sql.make_responder(
                               scripted_sql.responder_config(bench[0]))) as srv:
        def backbone(cache):
            return CachedBackbone(OpenAICompatibleBackbone(srv.base_url, "scripted-sql"),
                                  tmp_path / cache)
        experiment.build_memory(cfg, tmp_path / "wd", backbone=backbone("build_cache"),
                                benchmark=bench)
        yield srv, backbone


def test_base_and_countermem_drafts_in_flight_together_are_requested_once(tmp_path):
    """Both runs' first drafts of a task are the same request; with the runs in one pool they
    are in flight together and the server answers each once (the second joins the first)."""
    bench = scripted_sql.people_tasks(N_BUILD + N_EVAL, tmp_path)
    cfg = _config(tmp_path, concurrency=2 * N_EVAL)
    with _built(tmp_path, bench, cfg) as (srv, backbone):
        srv.requests.clear()
        _stats(srv, reset=True)
        cached = backbone("eval_cache")
        result = experiment.evaluate(cfg, tmp_path / "wd", backbone=cached, benchmark=bench)
        bodies = [json.dumps(r["messages"], sort_keys=True) for r in srv.requests]
        peak = _stats(srv)["peak_in_flight"]
    assert len(bodies) == len(set(bodies))  # no request reached the server twice
    first_drafts = [b for b in bodies if SQL.instructions in b and "Attempt 1:" not in b
                    and "Your draft action" not in b]
    assert len(first_drafts) == N_EVAL
    # every CounterMem first draft joined the base run's identical call in flight
    assert cached.joined_in_flight >= N_EVAL and cached.hits >= N_EVAL
    assert peak > N_EVAL // 2  # the two runs' tasks were in flight at once
    assert result["aggregate"]["per_seed"]["fixed"]["score"] > result["base"]["score"]


def test_eval_concurrency_counts_tasks_each_with_all_its_runs(tmp_path, monkeypatch):
    """``eval.concurrency`` = 3 keeps three evaluation tasks in flight with both their runs
    (base and CounterMem): six task runs at once, so that three distinct drafts, not one and a
    half, are at the server while the runs share them."""
    bench = scripted_sql.people_tasks(N_BUILD + N_EVAL, tmp_path)
    cfg = _config(tmp_path, concurrency=3)
    active, peak = set(), []
    original = Agent.run

    async def counted(self, task, *args, **kwargs):
        key = (kwargs.get("run"), task.task_id)
        active.add(key)
        peak.append(len(active))
        try:
            return await original(self, task, *args, **kwargs)
        finally:
            active.discard(key)
    with _built(tmp_path, bench, cfg) as (srv, backbone):
        monkeypatch.setattr(Agent, "run", counted)
        _stats(srv, reset=True)
        experiment.evaluate(cfg, tmp_path / "wd", backbone=backbone("eval_cache"),
                            benchmark=bench)
        server_peak = _stats(srv)["peak_in_flight"]
    assert max(peak) == 3 * 2  # tasks x runs
    assert server_peak >= 3    # three distinct first drafts in flight together


def test_gptoss_configs_keep_what_the_vllm_replicas_hold_in_flight_and_cpu_configs_one():
    """replicas × max-num-seqs of launch/serve_vllm.sh as the configs start it (docs/concurrency.md); llama.cpp runs in-process, one call at a time."""
    import pathlib
    import re

    script = (pathlib.Path(__file__).parents[1] / "launch" / "serve_vllm.sh").read_text()
    max_seqs = int(re.search(r"\bMAX_SEQS=(\d+)", script).group(1))
    assert config_module("paper.py").VLLM_MAX_NUM_SEQS == max_seqs
    served = config_module("paper.py").VLLM_REPLICAS * max_seqs
    gpt = paper_config("spider,react,gptoss")
    assert gpt.eval.concurrency == gpt.backbone.max_concurrency == served
    assert "--replicas 4" in pathlib.Path(__file__).parents[1].joinpath(
        "configs", "paper.py").read_text()
    for agent in ("react", "reflexion"):
        assert cpu_config(agent).eval.concurrency == 1


def test_the_scripted_judge_accepts_a_condition_only_for_its_own_database(tmp_path):
    """The benchmark's scripted model: a distilled condition names the task's database and the
    judge, shown a later task's question, accepts it only for a question about that database."""
    tasks, _, _ = scripted_sql.people_tasks(2, tmp_path)
    config = scripted_sql.responder_config(tasks)
    config["databases"][tasks[1].prompt.strip()] = "other_db"
    reply = scripted_sql.make_responder(config)
    condition = reply({"messages": [{"content": "Original action (failed):\n"
                                                 + tasks[0].visible_text()}]})
    assert condition.endswith("CONDITION: the question is about the people database")

    def judge(task):
        from countermem_jax.method.conditions.checkers import LLMJudgeChecker
        prompt = LLMJudgeChecker.PROMPT.format(
            condition=condition.split("CONDITION: ")[1], task=task.prompt)
        return reply({"messages": [{"content": prompt}]})
    assert (judge(tasks[0]), judge(tasks[1])) == ("YES", "NO")
