"""sha256 of a file read in blocks: what the data downloader (countermem_jax/data) and the CPU
model's GGUF check (countermem_jax/backbones/gguf.py) verify against their pinned hashes; and the
fingerprint of a file or folder that proves an artefact unchanged (phases/workdir.py)."""
import hashlib
import os
import pathlib


def _update(digest, path: str | os.PathLike, block_bytes: int = 1 << 22):
    """``digest`` fed the file's bytes, read ``block_bytes`` at a time (bounded memory)."""
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(block_bytes), b""):
            digest.update(block)
    return digest


def sha256_file(path: str | os.PathLike, block_bytes: int = 1 << 22) -> str:
    """Hex sha256 of the file's bytes, read ``block_bytes`` at a time (bounded memory)."""
    return _update(hashlib.sha256(), path, block_bytes).hexdigest()


def fingerprint(path: pathlib.Path) -> str:
    """sha256 over a file, or over every file of a folder with its path relative to the folder's
    parent (so the folder's own name, a checkpoint's step, counts): a renamed, added or modified
    file changes it."""
    digest = hashlib.sha256()
    for f in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(f.relative_to(path.parent)).encode())
        _update(digest, f)
    return digest.hexdigest()
