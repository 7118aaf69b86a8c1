"""What a bare GPU host needs of the client side (issue 37): the URL file and what its replicas
hold, the sweep leaving hosted-API cells their endpoint, no retry of a refused request, the
open-file limit, the preflight's timeout. Loopback servers only (benchmarks/testing)."""
import asyncio
import os
import pathlib
import subprocess
import sys

import pytest

import sweep_fixture
from countermem_jax.backbones import factory, served_urls
from countermem_jax.backbones.openai_http import BackboneError
from countermem_jax.sweep import execute, graph, ray_backend, spec
from benchmarks.testing.openai_server import LocalOpenAIServer
from countermem_jax.preflight import checks as preflight_checks
from helpers import paper_config

REPO = pathlib.Path(__file__).resolve().parent.parent

RUN_CONFIG = '''"""Two backbones of the sweep fixture: served on the host, or a hosted API."""
import sweep_fixture


def get_config(arg):
    benchmark, backbone = arg.split(",")
    c = sweep_fixture.get_config(benchmark)
    if backbone == "hosted":
        c.backbone.update(base_urls={hosted!r}, api_key_env="HOSTED_TEST_KEY")
    return c
'''


def _sweep(tmp_path, hosted_url="http://127.0.0.1:9/v1", methods=("countermem",)):
    (tmp_path / "run_config.py").write_text(RUN_CONFIG.format(hosted=hosted_url))
    sweep = spec.default_sweep()
    sweep.update(root=str(tmp_path / "root"), benchmarks=("sweep_people",),
                 backbones=("served", "hosted"), methods=methods, seeds=(0,),
                 run_config=str(tmp_path / "run_config.py") + ":{benchmark},{backbone}",
                 imports=("sweep_fixture",), report=False)
    sweep.overrides = {"data": {"data_dir": str(tmp_path)},
                       "splits": {"manifest": str(sweep_fixture.write_manifest(
                           tmp_path / "manifest.json"))}}
    return sweep


def test_a_missing_url_file_is_refused_at_once_with_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = paper_config("spider,react,gptoss").backbone
    with pytest.raises(FileNotFoundError, match=f"URL file {tmp_path / 'vllm_urls.txt'}, which "
                                                "does not exist"):
        factory.make_backbone(cfg)


def test_the_client_holds_what_the_url_files_replicas_batch(tmp_path):
    urls = tmp_path / "vllm_urls.txt"
    urls.write_text("http://127.0.0.1:8000/v1 max_num_seqs=256\n"
                    "http://127.0.0.1:8001/v1 max_num_seqs=256\n")
    cfg = paper_config("spider,react,gptoss").backbone
    cfg.base_urls, cfg.cache_dir = str(urls), ""
    backbone = factory.make_backbone(cfg)
    assert [r.url for r in backbone.replicas] == ["http://127.0.0.1:8000/v1",
                                                  "http://127.0.0.1:8001/v1"]
    assert cfg.max_concurrency == 1024 and backbone.max_concurrency == 512
    urls.write_text("http://127.0.0.1:8000/v1\n")   # plain URLs: the configured cap
    assert factory.make_backbone(cfg).max_concurrency == 1024


def test_a_tuple_override_of_base_urls_is_two_urls():
    cfg = sweep_fixture.get_config().backbone
    cfg.base_urls = '("http://a:1/v1", "http://b:2/v1")'   # --config.backbone.base_urls='(...)'
    backbone = factory.make_backbone(cfg)
    assert [r.url for r in backbone.replicas] == ["http://a:1/v1", "http://b:2/v1"]
    assert served_urls.read("http://a:1/v1, http://b:2/v1").urls == ["http://a:1/v1",
                                                                      "http://b:2/v1"]


def test_hosted_cells_keep_their_endpoint_and_reserve_no_slots(tmp_path, monkeypatch):
    runs = graph.build_graph(_sweep(tmp_path))
    served = [r for r in runs if "react_served" in r.name]
    hosted = [r for r in runs if "react_hosted" in r.name]
    assert {r.phase for r in served} == {r.phase for r in hosted} == set(spec.PHASES)
    # every phase on the host's servers reserves what it has in flight; hosted ones nothing
    assert all(r.llm_slots >= 1 for r in served) and all(r.llm_slots == 0 for r in hosted)
    monkeypatch.setenv(execute.DEFAULT_URLS_ENV, "/node/vllm_urls.txt")
    assert {execute.phase_config(r).backbone.base_urls for r in served} == {"/node/vllm_urls.txt"}
    assert {execute.phase_config(r).backbone.base_urls for r in hosted} == {"http://127.0.0.1:9/v1"}


def test_the_dry_run_shows_which_runs_go_side_by_side(tmp_path):
    runs = graph.build_graph(_sweep(tmp_path))
    text = graph.describe(runs, tmp_path / "root")
    hosted_lines = [l for l in text.splitlines() if "react_hosted" in l]
    assert hosted_lines and all("llm_slots=0   own-endpoint" in l for l in hosted_lines)
    steps = [l for l in text.splitlines() if l.startswith("side by side")]
    # build, train, evaluate of both cells: each step holds one run of each cell
    assert len(steps) == 3 and all(": 2 runs (" in s and "1 on their own endpoints" in s
                                   for s in steps)
    assert text.splitlines()[-1].startswith("runs per phase: ")


def test_a_request_the_server_refuses_is_not_retried_as_transient(tmp_path, monkeypatch):
    """HTTP 4xx (an unknown model name, a bad key) fails the run at once; Ray retries only the
    errors ray_backend lists as transient."""
    with LocalOpenAIServer(default="400") as server:
        cfg = sweep_fixture.get_config()
        cfg.backbone.base_urls = server.base_url
        backbone = factory.make_backbone(cfg.backbone)

        def phase(run, urls_env, imports):
            return backbone.chat_sync([{"role": "user", "content": "hi"}])
        monkeypatch.setattr(execute, "execute", phase)
        with pytest.raises(Exception) as refused:
            ray_backend._run_remote(None, "", ())
    assert len(server.requests) == 1
    assert not isinstance(refused.value, tuple(ray_backend._transient_errors()))
    assert issubclass(BackboneError, tuple(ray_backend._transient_errors()))  # 5xx still are


def test_binaries_raise_the_soft_open_file_limit_to_the_hard_one():
    code = ("import resource; from countermem_jax import cli\n"
            "cli.parse_flags_or_exit(['binary'])\n"
            "print(*resource.getrlimit(resource.RLIMIT_NOFILE))")
    out = subprocess.run(["bash", "-c", f"ulimit -Sn 256; {sys.executable} -c \"{code}\""],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    soft, hard = out.stdout.split()
    assert soft == hard and int(soft) > 256, out.stdout + out.stderr


def test_a_hard_limit_below_the_configs_concurrency_is_said():
    from countermem_jax.runtime import file_limits
    code = ("from countermem_jax.runtime import file_limits\n"
            "from countermem_jax.protocol import config_files\n"
            f"cfg = config_files.load('{REPO}/configs/paper.py:spider,react,gptoss')\n"
            "print(file_limits.check(cfg, echo=print))")
    out = subprocess.run(["bash", "-c", f"ulimit -n 1024; {sys.executable} -c \"{code}\""],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.splitlines()[-1] == "False", out.stdout + out.stderr
    assert "open files are limited to 1024 (hard limit 1024), below the ~2304" in out.stdout
    cfg = paper_config("spider,react,cpu")
    assert file_limits.files_needed(cfg) == 1 + file_limits.BASE_FILES   # no sockets
    import ml_collections   # a study config (countermem_jax.study): read through its base
    gpt = paper_config("spider,react,gptoss")
    study = ml_collections.ConfigDict({"base": gpt.to_dict(), "panels": ()})
    assert file_limits.files_needed(study) == file_limits.files_needed(gpt) == 2304


def test_the_preflight_timeout_follows_reasoning_effort_and_token_budget(monkeypatch):
    cfg = paper_config("spider,react,gptoss")
    names = preflight_checks.templates_of(cfg)
    budget = max(preflight_checks.request_of(cfg, n, "medium")[1].max_tokens for n in names)
    medium = preflight_checks.request_timeout_s(cfg, names)
    assert medium == pytest.approx(30 + budget / 20) and medium > 200
    cfg.backbone.reasoning_effort = "low"
    assert 60 <= preflight_checks.request_timeout_s(cfg, names) < medium
    cfg.backbone.reasoning_effort = "medium"
    seen = []
    real = factory.make_backbone
    monkeypatch.setattr(factory, "make_backbone",
                        lambda bcfg: seen.append(bcfg.timeout_s) or real(bcfg))
    with LocalOpenAIServer(gpt_oss_style=True) as server:
        cfg.backbone.base_urls = server.base_url
        preflight_checks.run(cfg, duration_s=0.2, concurrency=2)
    assert seen == [medium]


def test_the_preflight_measures_completion_tokens_per_second_per_url():
    """Short bounded replies against every URL the client holds: tokens/s in all and per URL,
    the value the sweep's dry run takes; a URL that answered nothing is a NO-GO."""
    cfg = paper_config("spider,react,gptoss")
    with LocalOpenAIServer(gpt_oss_style=True) as a, LocalOpenAIServer(gpt_oss_style=True) as b:
        cfg.backbone.base_urls = f"{a.base_url},{b.base_url}"
        report = preflight_checks.run(cfg, duration_s=0.5, concurrency=4)
    assert set(report.tokens_by_url) == {a.base_url, b.base_url}
    assert all(n > 0 for n in report.tokens_by_url.values())
    assert report.tokens_per_s == pytest.approx(sum(report.tokens_by_url.values())
                                                / report.duration_s)
    text = preflight_checks.render(report)
    assert f"tokens/s: {report.tokens_per_s:,.0f} completion tokens/s in all ({a.base_url}: " in text
    assert f"--tokens_per_s={report.tokens_per_s:.0f}" in text
    report.tokens_by_url[b.base_url] = 0
    assert f"throughput: no completion tokens from {b.base_url}" in report.problems
    assert not report.go


def test_the_preflight_throughput_requests_are_bounded():
    seen = []

    cfg = paper_config("spider,react,gptoss")
    with LocalOpenAIServer(gpt_oss_style=True) as server:
        cfg.backbone.update(base_urls=server.base_url, cache_dir="")
        backbone = factory.make_backbone(cfg.backbone)
        real = backbone._chat

        async def chat(messages, params):
            seen.append(params.max_tokens)
            return await real(messages, params)

        async def measure():
            try:
                await preflight_checks._throughput(backbone, cfg, 2, 0.2)
            finally:
                await backbone.aclose()
        backbone._chat = chat
        asyncio.run(measure())
    assert seen and set(seen) == {preflight_checks.THROUGHPUT_MAX_TOKENS}
