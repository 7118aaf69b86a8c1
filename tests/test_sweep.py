"""The sweep without Ray: the graph of ``--dry_run``, the serial ``--local`` run with
its skipping of finished runs, failures and what they block, and the line a missing Ray prints."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

import sweep_fixture
import sweep_helpers
from countermem_jax.sweep import SweepError, graph, run_sweep

REPO = pathlib.Path(__file__).resolve().parent.parent


def _binary(*args, block_ray=False, env=None):
    """``python -m countermem_jax.sweep ARGS`` (optionally as if Ray were not installed)."""
    code = ("import sys, runpy\n" + ("sys.modules['ray'] = None\n" if block_ray else "") +
            f"sys.argv = ['countermem_jax.sweep', *{list(args)!r}]\n"
            "runpy.run_module('countermem_jax.sweep', run_name='__main__', alter_sys=True)\n")
    path = os.pathsep.join([str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=300,
                          env={**os.environ, "PYTHONPATH": path, **(env or {})})


def test_dry_run_prints_the_graph_and_starts_nothing(tmp_path):
    path = sweep_helpers.write_sweep(tmp_path, tmp_path / "root")
    out = _binary(f"--sweep={path}", "--dry_run")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"sweep: 12 phase runs in 4 workdirs under {tmp_path / 'root'}/"
    runs = [line for line in lines if line.startswith("#")]
    assert len(runs) == 12
    people = [r for r in runs if "sweep_people/react_scripted/countermem-" in r]
    assert [r.split()[1].split(":")[1] for r in people] == [
        "build_memory", "train_selector[seed", "evaluate[seed", "train_selector[seed",
        "evaluate[seed"]
    first = int(people[0].split()[0][1:])
    assert people[0].endswith("after: -") and people[1].endswith(f"after: #{first}")
    assert "evaluate[seed 1, all seeds]" in people[4]
    # eval.concurrency of the run config (2) is what an evaluation reserves; the others 1
    assert "llm_slots=2" in people[2] and "llm_slots=1" in people[0]
    assert lines[-3] == "runs per phase: build_memory 2, train_selector 4, evaluate 6"
    assert lines[-2].startswith("LLM calls (upper bounds") and "--tokens_per_s" in lines[-1]
    assert not (tmp_path / "root").exists()


def test_paper_grid_dry_run_has_one_build_per_store():
    out = _binary("--sweep=configs/sweeps/paper_grid.py", "--dry_run")
    assert out.returncode == 0, out.stderr
    # 12 benchmarks x 2 agents x 2 backbones = 48 settings; per setting 8 memories (CounterMem
    # and 7 baselines), 5 selector seeds, 5 CounterMem + 9 baseline evaluations
    assert out.stdout.splitlines()[-3] == \
        "runs per phase: build_memory 384, train_selector 240, evaluate 672"


def test_missing_ray_names_the_extra(tmp_path):
    path = sweep_helpers.write_sweep(tmp_path, tmp_path / "root")
    out = _binary(f"--sweep={path}", block_ray=True)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "error: Ray is not installed: pip install -e '.[sweep]' (the optional `sweep` extra), "
        "or run the sweep in this process with --local")
    assert not list((tmp_path / "root").glob("*/*/*/log.jsonl"))


def test_unknown_override_is_one_line(tmp_path):
    path = sweep_helpers.write_sweep(tmp_path, tmp_path / "root")
    path.write_text(path.read_text().replace('"splits": {', '"splits": {"n_evall": 3, '))
    out = _binary(f"--sweep={path}", "--dry_run")
    assert out.returncode == 1
    assert out.stderr.strip() == \
        "error: sweep.overrides: the run config has no field 'splits.n_evall'"
    typo = _binary(f"--sweep={path}", "--sweep.sedds=(0,)", "--dry_run")
    assert typo.returncode == 1
    assert typo.stderr.strip() == \
        'error: no such config field: \'sedds\' Did you mean "seeds" instead of "sedds"?'


def test_local_sweep_skips_finished_runs_and_reports_failures(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # --local needs no Ray
    path = sweep_helpers.write_sweep(tmp_path, tmp_path / "root", benchmarks=("sweep_pets",))
    sweep = sweep_helpers.load_sweep(path)
    with sweep_fixture.ScriptedServer() as server:
        monkeypatch.setenv("COUNTERMEM_LLM_URLS", server.base_url)
        first = run_sweep(sweep, local=True, report=False, echo=lambda line: None)
        assert first.ok and set(first.states.values()) == {"done"} and len(first.states) == 6
        calls = len(server.requests)
        sweep.report = True
        lines = []
        again = run_sweep(sweep, local=True, echo=lines.append)
        assert set(again.states.values()) == {"skipped"} and len(server.requests) == calls
    report = tmp_path / "root" / "report" / "report.md"
    assert f"report: {report}" in lines and "sweep_pets" in report.read_text()
    status = json.loads((tmp_path / "root" / "sweep_status.json").read_text())
    assert {s["state"] for s in status.values()} == {"skipped"}
    runs = graph.build_graph(sweep)
    cm = pathlib.Path(next(r for r in runs if r.phase == "build_memory").workdir)
    # seeds trained one call at a time are all recorded, so evaluation checks each of them
    prints = json.loads((cm / "selector" / "fingerprints.json").read_text())
    assert sorted(prints) == ["0", "1"]
    metrics = json.loads((cm / "metrics.json").read_text())
    assert metrics["seeds"] == ["0", "1"]
    # a workdir made with another config: its runs fail before they start, the others run
    recorded = json.loads((cm / "fingerprint.json").read_text())
    recorded["build_memory"]["fields"]["agent.max_attempts"] = 7
    (cm / "fingerprint.json").write_text(json.dumps(recorded))
    for marker in (cm / ".sweep").glob("*.done.json"):
        marker.unlink()
    lines = []
    outcome = run_sweep(sweep, local=True, report=False, echo=lines.append)
    assert not outcome.ok and any("runs did not finish" in line for line in lines)
    assert {n: s for n, s in outcome.states.items() if not n.startswith(str(cm))} == {
        n: "skipped" for n in outcome.states if not n.startswith(str(cm))}
    mine = {n: e for n, e in outcome.errors.items() if n.startswith(str(cm))}
    assert len(mine) == 5 and all("agent.max_attempts: 7 -> 2" in e for e in mine.values())
    # a run that fails while it runs blocks its dependents only
    broken = sweep_helpers.load_sweep(path)
    broken.root = str(tmp_path / "broken")
    with sweep_fixture.ScriptedServer() as server:
        server.default = "400"   # every request refused: the backbone fails for good
        monkeypatch.setenv("COUNTERMEM_LLM_URLS", server.base_url)
        outcome = run_sweep(broken, local=True, report=False, echo=lambda line: None)
    states = sorted(outcome.states.values())
    assert states == ["blocked"] * 4 + ["failed"] * 2
    build = next(n for n in outcome.states if n.endswith(":build_memory"))
    assert outcome.errors[build].startswith("RequestRejected")   # HTTP 400: refused, not transient
    workdir = build.rsplit(":", 1)[0]
    assert all(n.startswith(workdir) and e.startswith(f"not started: dependency {workdir}:")
               for n, e in outcome.errors.items() if outcome.states[n] == "blocked")


def test_a_seeds_replaced_checkpoint_is_refused_after_later_seeds_trained(tmp_path,
                                                                         monkeypatch):
    """Seed 0 trained, then seed 1 in its own call: seed 0's checkpoint is still checked."""
    from countermem_jax import experiment
    path = sweep_helpers.write_sweep(tmp_path, tmp_path / "root", benchmarks=("sweep_pets",),
                                     methods=("countermem",))
    runs = [r for r in graph.build_graph(sweep_helpers.load_sweep(path))
            if r.phase != "evaluate"]
    with sweep_fixture.ScriptedServer() as server:
        monkeypatch.setenv("COUNTERMEM_LLM_URLS", server.base_url)
        from countermem_jax.sweep import execute
        for run in runs:   # build, train seed 0, train seed 1
            execute.execute(run)
        wd = pathlib.Path(runs[0].workdir)
        best = json.loads((wd / "selector" / "fingerprints.json").read_text())["0"]["step"]
        victim = next(p for p in sorted((wd / "selector" / "seed_0" / str(best)).rglob("*"))
                      if p.is_file())
        victim.write_bytes(victim.read_bytes() + b" ")
        cfg = execute.phase_config(runs[0])
        cfg.eval.seeds = (0,)
        with pytest.raises(Exception, match="not the one training recorded|content changed"):
            experiment.evaluate(cfg, wd)


def test_bad_axis_is_refused():
    sweep = sweep_helpers.load_sweep(REPO / "configs" / "sweeps" / "spider_cpu.py")
    sweep.methods = ("countermem", "lru_memory")
    with pytest.raises(SweepError, match="unknown method 'lru_memory'"):
        graph.build_graph(sweep)


def test_ray_cluster_script_serves_and_advertises_the_hosts_slots(tmp_path):
    """launch/ray_cluster.sh with stand-ins for `vllm` and `ray` (tests/fake_bin): 2 replicas x
    64 sequences = 128 slots, and the node's workers get the URL file of its own replicas."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    weights = tmp_path / "weights"   # a local copy: nothing to fetch
    weights.mkdir()
    env = dict(os.environ, PATH=f"{REPO / 'tests' / 'fake_bin'}:{os.environ['PATH']}",
               FAKE_VLLM_LOG_DIR=str(tmp_path), FAKE_RAY_LOG=str(tmp_path / "ray.json"),
               FAKE_DF_FREE_KB=str(500 * 10 ** 6), HF_HOME=str(tmp_path / "hf_home"))
    out = subprocess.run(["bash", str(REPO / "launch" / "ray_cluster.sh"), "worker",
                          "--address", "127.0.0.1:6379", "--num-cpus", "8", "--replicas", "2",
                          "--max-seqs", "64", "--port-base", str(port + 1), "--model",
                          str(weights), "--stagger", "0", "--internal-port-base",
                          str(port + 1000)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    ray_call = json.loads((tmp_path / "ray.json").read_text())
    assert ray_call["urls"] == str(tmp_path / "vllm_urls.txt")
    # two replicas started (serve_vllm.sh removes its URL file once they are stopped)
    assert len([p for p in tmp_path.glob("*.json") if p.stem.isdigit()]) == 2
    assert ray_call["args"] == ["start", "--block", "--resources", '{"llm_slots": 128}',
                                "--num-cpus", "8", "--address", "127.0.0.1:6379"]
    refused = subprocess.run(["bash", str(REPO / "launch" / "ray_cluster.sh"), "worker"],
                             env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "--address" in refused.stderr


def test_sweep_slots_never_change_a_fingerprinted_concurrency():
    """Evaluation concurrency and construction waves follow the sweep's llm_slots (they do not
    change results); a fingerprinted concurrency field (selector waves) keeps the run config's
    value, so the sweep never turns one experiment into another."""
    from countermem_jax.sweep import spec
    sweep = sweep_helpers.load_sweep(REPO / "configs" / "sweeps" / "spider_cpu.py")
    sweep.llm_slots.update(evaluate=6, build_memory=4, train_selector=8)
    cfg = spec.cells(sweep)[0].config
    assert spec.slots_for(sweep, cfg, "evaluate") == 6
    assert spec.slots_for(sweep, cfg, "build_memory") == 4     # construction.wave_size
    assert spec.slots_for(sweep, cfg, "train_selector") == cfg.selector.wave_size
    with cfg.unlocked():
        cfg.selector.wave_size = 2   # fingerprinted: selector training in waves
    assert spec.slots_for(sweep, cfg, "train_selector") == 2


def _paper_cells(**fields):
    sweep = sweep_helpers.load_sweep(REPO / "configs" / "sweeps" / "paper_grid.py")
    sweep.update(dict(benchmarks=("spider",), agents=("react",), backbones=("gptoss", "api"),
                      methods=("countermem", "none", "expel", "best_of_n"), seeds=(0, 1)))
    sweep.update(fields)
    return sweep, {(r.workdir.split("/")[-2].split("_")[1], r.workdir.split("/")[-1].split("-")[0],
                    r.phase, r.label): r for r in graph.build_graph(sweep)}


def test_a_run_reserves_what_it_can_use():
    """Spider on gpt-oss: 40 evaluation tasks, each with the base run and one method run (one
    seed per evaluation run), reserve 80 slots, not eval.concurrency's 1,024; the base agent
    alone 40; Best-of-N's K = 4 extra candidates at once 200; a CounterMem build its 60 tasks
    (its wave of 0: what the servers hold), a baseline's sequential build 1; selector training
    its (fingerprinted) wave. Each run's concurrency is what it reserved."""
    _, runs = _paper_cells()
    slots = {k[1:]: r.llm_slots for k, r in runs.items() if k[0] == "gptoss"}
    assert slots[("countermem", "evaluate", "seed 0")] == 80
    assert slots[("countermem", "evaluate", "seed 1, all seeds")] == 80
    assert slots[("none", "evaluate", "")] == 40
    assert slots[("best_of_n", "evaluate", "")] == 200
    assert slots[("countermem", "build_memory", "")] == 60
    assert slots[("expel", "build_memory", "")] == 1
    assert slots[("countermem", "train_selector", "seed 0")] == 204
    run = runs[("gptoss", "countermem", "evaluate", "seed 0")]
    assert run.config.backbone.max_concurrency == run.config.eval.concurrency == 80
    build = runs[("gptoss", "countermem", "build_memory", "")]
    assert build.config.construction.wave_size == build.config.backbone.max_concurrency == 60
    assert runs[("gptoss", "countermem", "train_selector", "seed 0")].config.selector.wave_size \
        == 204


def test_hosted_runs_take_a_share_of_one_cluster_wide_cap():
    """API cells reserve no node slots; each takes at most sweep.hosted_slots of the
    cluster-wide cap, and its client never holds more in flight."""
    _, runs = _paper_cells(hosted_slots=5)
    hosted = [r for k, r in runs.items() if k[0] == "api"]
    assert hosted and all(r.llm_slots == 0 and 0 < r.hosted_slots <= 5 for r in hosted)
    assert all(r.config.backbone.max_concurrency <= 5 for r in hosted)
    assert not any(r.hosted_slots for k, r in runs.items() if k[0] == "gptoss")
    _, uncapped = _paper_cells(hosted_slots=0)
    assert not any(r.hosted_slots for r in uncapped.values())


def test_the_scheduler_never_runs_more_hosted_slots_than_the_cap(tmp_path):
    """Six independent hosted runs of 3 slots under a cap of 7: at most two run at once."""
    from countermem_jax.sweep import schedule

    class Executor:
        def __init__(self):
            self.running, self.peak = [], 0

        def submit(self, run):
            self.running.append(run)
            self.peak = max(self.peak, sum(r.hosted_slots for r in self.running))

        def wait(self, timeout):
            return [(self.running.pop(0).name, {}, None)]

    runs = [graph.PhaseRun(f"{tmp_path}/w{i}:evaluate", "evaluate", str(tmp_path / f"w{i}"),
                           None, [], 1.0, 0, hosted_slots=3) for i in range(6)]
    executor = Executor()
    outcome = schedule.run_graph(runs, executor, echo=lambda *_: None, hosted_cap=7)
    assert outcome.ok and executor.peak == 6
    executor = Executor()
    schedule.run_graph(runs, executor, echo=lambda *_: None)
    assert executor.peak == 18   # no cap: all at once


def test_the_dry_run_prints_the_grids_calls_tokens_and_hours():
    """The per-run bounds add up to the run config's own (studies/cost.py: the build, each
    seed's training, the base run once, one memory run per seed), at agent.max_tokens each; at
    --tokens_per_s they become hours; hosted cells are counted apart."""
    from countermem_jax.studies import cost
    from countermem_jax.sweep import wall_time
    sweep, runs = _paper_cells(methods=("countermem",))
    cfg = next(r.config for k, r in runs.items() if k[:3] == ("gptoss", "countermem",
                                                              "build_memory"))
    with cfg.unlocked():
        cfg.selector.seeds = (0, 1)
        cfg.eval.seeds = ()
    whole = cost.phase_requests(cfg)
    t = wall_time.tally(list(runs.values()))
    assert t.served_calls == sum(whole.values()) > 0
    assert t.served_tokens == t.served_calls * 4096 and t.hosted_calls > 0
    text = wall_time.describe(list(runs.values()), tokens_per_s=1000.0, tokens_per_call=100)
    hours = wall_time.tally(list(runs.values()), 100).served_tokens / 1000 / 3600
    assert f"at 1,000 tokens/s: at most {hours:,.1f} h" in text
    assert "not counted" not in text
    out = _binary("--sweep=configs/sweeps/paper_grid.py", "--dry_run", "--tokens_per_s=20480",
                  "--sweep.benchmarks=('spider',)", "--sweep.methods=('countermem',)")
    assert out.returncode == 0, out.stderr
    assert "expected wall time on the hosts' servers at 20,480 tokens/s: at most" in out.stdout


def test_every_method_of_the_grid_has_a_request_bound():
    """The Table 1 grid's wall time counts every method's calls (ExpeL, Generative Agents,
    Voyager, MemGPT and Best-of-N bounded as their builders and augmentations call)."""
    from countermem_jax import baselines
    from countermem_jax.studies import cost
    from countermem_jax.sweep import wall_time
    _, runs = _paper_cells(methods=tuple(baselines.METHODS))
    assert not wall_time.tally(list(runs.values())).unbounded
    cfg = next(iter(runs.values())).config
    per = {}
    for method in baselines.METHODS:
        with cfg.unlocked():
            cfg.method = method
        per[method] = cost.task_requests(cfg)
    attempts = cfg.agent.max_attempts
    assert per["best_of_n"] == {"build": 0, "base": attempts, "memory": attempts * 6}
    assert per["memgpt"]["memory"] == attempts * 3 and per["memgpt"]["build"] == attempts * 3 + 3
    assert per["expel"]["build"] == attempts + 2
