"""sha256 of a file read in blocks: what the data downloader (countermem_jax/data) and the CPU
model's GGUF check (countermem_jax/backbones/gguf.py) verify against their pinned hashes."""
import hashlib
import os


def sha256_file(path: str | os.PathLike, block_bytes: int = 1 << 22) -> str:
    """Hex sha256 of the file's bytes, read ``block_bytes`` at a time (bounded memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(block_bytes), b""):
            digest.update(block)
    return digest.hexdigest()
