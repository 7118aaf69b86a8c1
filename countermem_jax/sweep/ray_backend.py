"""Phase runs as Ray tasks (the optional ``sweep`` extra: ``pip install -e '.[sweep]'``)."""
from countermem_jax.runtime import jax_platform
from countermem_jax.sweep import execute
from countermem_jax.sweep.schedule import one_line
from countermem_jax.sweep.spec import SweepError

LLM_SLOTS = "llm_slots"
MISSING_RAY = ("Ray is not installed: pip install -e '.[sweep]' (the optional `sweep` extra), "
               "or run the sweep in this process with --local")


def import_ray():
    """``ray``, or a SweepError naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise SweepError(MISSING_RAY) from None
    return ray


class RunRefused(RuntimeError):
    """A run stopped by a server refusing its request (``openai_http.RequestRejected``); not a
    transient error, so Ray does not retry it."""


def _run_remote(run, urls_env, imports):
    # a worker of a node started without launch/ray_cluster.sh: JAX still stays off the GPUs
    # vLLM holds (countermem_jax/runtime/jax_platform.py)
    jax_platform.choose_platform([])
    from countermem_jax.backbones.openai_http import RequestRejected
    try:
        return execute.execute(run, urls_env, imports)
    except RequestRejected as err:   # a BackboneError, which would be retried as transient
        raise RunRefused(str(err)) from None


def _transient_errors() -> list:
    from countermem_jax.backbones.openai_http import BackboneError
    return [BackboneError, ConnectionError, TimeoutError]


def check_feasible(ray, runs) -> None:
    """Refuses a run that no alive node could ever hold (Ray would wait for it forever)."""
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    most_slots = max((n.get(LLM_SLOTS, 0) for n in nodes), default=0)
    most_cpus = max((n.get("CPU", 0) for n in nodes), default=0)
    for run in runs:
        if run.llm_slots > most_slots:
            raise SweepError(f"{run.name} needs {run.llm_slots} {LLM_SLOTS} but the largest node "
                             f"advertises {most_slots:g}; start nodes with launch/ray_cluster.sh "
                             "(slots = replicas x max-num-seqs) or lower sweep.llm_slots")
        if run.cpus > most_cpus:
            raise SweepError(f"{run.name} needs {run.cpus:g} CPUs but the largest node has "
                             f"{most_cpus:g}; lower sweep.cpus")


class RayExecutor:
    """Submits runs as Ray tasks and reports each one as it ends."""

    def __init__(self, ray, urls_env: str, imports: tuple, max_retries: int):
        self.ray = ray
        self.urls_env, self.imports, self.max_retries = urls_env, tuple(imports), max_retries
        self.task = ray.remote(_run_remote)
        self.pending = {}

    def submit(self, run) -> None:
        """Starts ``run`` as a Ray task reserving its CPUs and LLM slots; transient backbone
        and connection errors are retried up to ``max_retries`` times."""
        options = dict(num_cpus=run.cpus, max_retries=self.max_retries,
                       retry_exceptions=_transient_errors(), name=run.name)
        if run.llm_slots:
            options["resources"] = {LLM_SLOTS: run.llm_slots}
        ref = self.task.options(**options).remote(run, self.urls_env, self.imports)
        self.pending[ref] = run.name

    def wait(self, timeout: float):
        """Up to ``timeout`` seconds for a run to end; returns every run that has ended as
        ``(name, info, error)``, error a single line (None on success), or [] on timeout."""
        ray = self.ray
        refs = list(self.pending)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        out = []
        for ref in ready:
            name = self.pending.pop(ref)
            try:
                out.append((name, ray.get(ref), None))
            except ray.exceptions.RayTaskError as err:
                cause = err.cause if getattr(err, "cause", None) is not None else err
                out.append((name, None, one_line(cause)))
            except ray.exceptions.RayError as err:  # the worker or its node died too often
                out.append((name, None, f"{type(err).__name__} after {self.max_retries} "
                                        f"retries: {' '.join(str(err).split())[:300]}"))
        return out
