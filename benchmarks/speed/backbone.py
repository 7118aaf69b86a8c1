r"""HTTP client throughput against a local server with fixed latency, and CPU-model tokens/s.

    python -m benchmarks.speed.backbone [--latency_ms=100] [--requests=256] \
        [--no_cpu_model]

For each concurrency c the ideal rate is c / latency; the goal is ≥ 0.8 of ideal up to c = 32.
"""
import asyncio
import time

from absl import app, flags

from countermem_jax.backbones.base import SamplingParams
from countermem_jax.testing.openai_server import server_process
from countermem_jax.backbones.openai_http import OpenAICompatibleBackbone
from benchmarks.common import print_result

_LATENCY = flags.DEFINE_integer("latency_ms", 100, "Server latency per request.")
_REQUESTS = flags.DEFINE_integer("requests", 256, "Requests per concurrency level (≥ 4 × c).")
_LEVELS = flags.DEFINE_list("concurrency", ["1", "8", "32", "128"], "Concurrency levels.")
_NO_CPU = flags.DEFINE_bool("no_cpu_model", False, "Skip the CPU-model tokens/s measurement.")


async def _throughput(url: str, concurrency: int, n: int) -> float:
    """Requests per second of ``n`` concurrent chats at client concurrency ``concurrency``.

    Connections are warmed with one round first, so connection setup is not timed.
    """
    client = OpenAICompatibleBackbone(url, "bench", max_concurrency=concurrency)
    msg = [{"role": "user", "content": "ping"}]
    await asyncio.gather(*[client.chat(msg) for _ in range(concurrency)])  # warm connections
    start = time.perf_counter()
    await asyncio.gather(*[client.chat(msg) for _ in range(n)])
    elapsed = time.perf_counter() - start
    await client.aclose()
    return n / elapsed


def main(argv):
    """Measures the HTTP client against the loopback server at each concurrency level, then (unless
    ``--no_cpu_model``) the CPU model's generation speed; prints the ``result:`` line.
    """
    del argv
    latency = _LATENCY.value / 1000
    result = {"latency_ms": _LATENCY.value}
    with server_process(latency_s=latency) as url:
        for c in map(int, _LEVELS.value):
            n = max(_REQUESTS.value if c <= 32 else 2 * _REQUESTS.value, 4 * c)
            # Sequential requests cost latency each: 30 are enough for a stable rate.
            if c == 1:
                n = min(n, 30)
            rate = asyncio.run(_throughput(url, c, n))
            ideal = c / latency
            result[f"c{c}"] = {"requests_per_s": rate, "ideal": ideal, "ratio": rate / ideal}
            print(f"concurrency {c:>4}: {rate:8.1f} req/s, ideal {ideal:8.1f}, ratio "
                  f"{rate / ideal:.2f}" + (" (goal ≥ 0.8)" if c <= 32 else ""))
    if not _NO_CPU.value:
        try:
            from countermem_jax.backbones.llama_cpp_backbone import LlamaCppBackbone
            backbone = LlamaCppBackbone(n_ctx=1024)
            msg = [{"role": "user", "content": "Count from 1 to 300, separated by commas."}]
            backbone.chat_sync(msg, SamplingParams(max_tokens=8))
            start = time.perf_counter()
            out = backbone.chat_sync(msg, SamplingParams(max_tokens=128))
            elapsed = time.perf_counter() - start
            result["cpu_model_tokens_per_s"] = out.usage.completion_tokens / elapsed
            result["cpu_model_completion_tokens"] = out.usage.completion_tokens
            print(f"CPU model: {result['cpu_model_tokens_per_s']:.1f} tokens/s "
                  f"({out.usage.completion_tokens} completion tokens, prompt processing included)")
        except Exception as err:  # the cpu extra is optional
            print(f"CPU model skipped: {err}")
    print_result(result)


if __name__ == "__main__":
    app.run(main)
