"""A baseline mechanism's memory: items, builder state, file format, freezing (docs/baselines.md).

Each item carries ``item_id``, ``kind`` and ``source_task_ids`` (the construction tasks whose
runs wrote or changed it), which is what the same-task exclusion reads.
"""
import pathlib
import types
from typing import Any, Iterable

from countermem_jax.method.memory.persistence import (SnapshotHashMismatch, StoreFormatError,
                                               read_jsonl, write_jsonl_atomic)
from countermem_jax.method.memory.store import sha256_json

FORMAT = "countermem-baseline-memory"
VERSION = 1


class FrozenMemoryError(RuntimeError):
    """Raised by every attempt to change a frozen baseline memory, or when it was changed."""


def _freeze(value):
    """Deep read-only copy: dicts become ``MappingProxyType``, lists become tuples."""
    if isinstance(value, dict):
        return types.MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def thaw(value):
    """A plain JSON copy of a (possibly frozen) item."""
    if isinstance(value, (dict, types.MappingProxyType)):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def _hash(method: str, config: dict, state: dict, items: Iterable) -> str:
    """Content hash of a memory: sha256 of method, config, builder state and items, in order."""
    return sha256_json({"method": method, "config": thaw(config), "state": thaw(state),
                        "items": [thaw(i) for i in items]})


class BaselineMemory:
    """Construction-time memory of one method: only its builder writes to it."""
    frozen = False

    def __init__(self, method: str, config: dict, items: Iterable[dict] = (),
                 state: dict | None = None, meta: dict | None = None):
        self.method, self.config = method, dict(config)
        self.items: list[dict] = [dict(i) for i in items]
        self.state: dict[str, Any] = dict(state or {})
        self.meta: dict[str, Any] = dict(meta or {})  # bookkeeping (processed tasks); not hashed

    def add(self, kind: str, source_task_ids: Iterable[str], **fields) -> dict:
        """Appends an item; its id is a hash of its content and position (stable on resume).

        ``source_task_ids`` are the construction tasks whose runs wrote the item: the same-task
        exclusion at use time reads them. Returns the stored item (a builder may update it later,
        e.g. ExpeL's importance counts, until the memory is frozen).
        """
        item = {"kind": kind, "source_task_ids": sorted(set(source_task_ids)), **fields}
        item["item_id"] = sha256_json([len(self.items), item])[:16]
        self.items.append(item)
        return item

    def of_kind(self, kind: str) -> list:
        """Items of one ``kind`` (e.g. ExpeL's insights vs its successes), in order."""
        return [i for i in self.items if i["kind"] == kind]

    def content_hash(self) -> str:
        """Hash of the current content (recomputed on every call; the memory is mutable)."""
        return _hash(self.method, self.config, self.state, self.items)

    def freeze(self) -> "FrozenBaselineMemory":
        """A read-only snapshot of the current content, for evaluation."""
        return FrozenBaselineMemory(self.method, self.config, self.items, self.state, self.meta)


class FrozenBaselineMemory:
    """Read-only snapshot used at evaluation; ``verify()`` proves it is still what was frozen."""
    frozen = True

    def __init__(self, method: str, config: dict, items: Iterable[dict], state: dict,
                 meta: dict | None = None):
        # ``__setattr__`` is disabled below, so the fields are set through ``object``.
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "config", _freeze(dict(config)))
        object.__setattr__(self, "items", _freeze(list(items)))
        object.__setattr__(self, "state", _freeze(dict(state)))
        object.__setattr__(self, "meta", _freeze(dict(meta or {})))
        object.__setattr__(self, "_hash", _hash(method, config, state, items))

    def __setattr__(self, name, value):
        raise FrozenMemoryError(f"frozen {self.method} memory is read-only (tried to set {name})")

    def __delattr__(self, name):
        raise FrozenMemoryError(f"frozen {self.method} memory is read-only")

    def add(self, *args, **kwargs):
        """Always raises ``FrozenMemoryError``: evaluation never writes memory."""
        raise FrozenMemoryError(f"frozen {self.method} memory is read-only: evaluation never "
                                "writes memory")

    def of_kind(self, kind: str) -> list:
        """Items of one ``kind``, in order (read-only mappings)."""
        return [i for i in self.items if i["kind"] == kind]

    def content_hash(self) -> str:
        """The hash computed when the snapshot was made."""
        return self._hash

    def verify(self) -> str:
        """Recomputes the content hash; raises if anything changed since freezing."""
        actual = _hash(self.method, self.config, self.state, self.items)
        if actual != self._hash:
            raise FrozenMemoryError(f"frozen {self.method} memory changed: hash {actual[:16]}… "
                                    f"!= {self._hash[:16]}…")
        return actual


def save_memory(memory: BaselineMemory | FrozenBaselineMemory, path) -> pathlib.Path:
    """Atomically writes ``memory`` (open or frozen) in the format of docs/baselines.md."""
    header = {"format": FORMAT, "version": VERSION, "method": memory.method,
              "frozen": memory.frozen, "content_hash": memory.content_hash(),
              "num_items": len(memory.items), "config": thaw(memory.config),
              "state": thaw(memory.state), "meta": thaw(memory.meta)}
    return write_jsonl_atomic(path, [header] + [thaw(i) for i in memory.items])


def load_memory(path, method: str | None = None) -> BaselineMemory | FrozenBaselineMemory:
    """Loads and validates a memory file (header, item count, content hash)."""
    path = pathlib.Path(path)
    (_, header), *lines = read_jsonl(path, FORMAT)
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise StoreFormatError(f"{path}:1: not a {FORMAT} v{VERSION} file (format "
                               f"{header.get('format')!r}, version {header.get('version')!r})")
    if method is not None and header.get("method") != method:
        raise StoreFormatError(f"{path}:1: field 'method': the file holds {header.get('method')!r} "
                               f"memory, expected {method!r}")
    items = [obj for _, obj in lines]
    for lineno, obj in lines:
        if not isinstance(obj.get("item_id"), str) or not isinstance(obj.get("source_task_ids"),
                                                                      list):
            raise StoreFormatError(f"{path}:{lineno}: item needs 'item_id' and 'source_task_ids'")
    if len(items) != header.get("num_items"):
        raise StoreFormatError(f"{path}: header says {header.get('num_items')} items, file has "
                               f"{len(items)} (truncated or edited file)")
    cls = FrozenBaselineMemory if header.get("frozen") else BaselineMemory
    memory = cls(header["method"], header.get("config") or {}, items, header.get("state") or {},
                 header.get("meta") or {})
    if memory.content_hash() != header.get("content_hash"):
        raise SnapshotHashMismatch(f"{path}: content hash {memory.content_hash()[:16]}… does not "
                                   f"match the header's {str(header.get('content_hash'))[:16]}… "
                                   "(the file was modified)")
    return memory


def hash_path(path) -> pathlib.Path:
    """``<file>.sha256``: the sidecar holding a frozen memory's expected content hash."""
    return pathlib.Path(str(path) + ".sha256")


def save_frozen(memory: BaselineMemory, path) -> FrozenBaselineMemory:
    """Freezes, writes the frozen file and its ``.sha256`` sidecar; returns the frozen memory."""
    frozen = memory.freeze()
    save_memory(frozen, path)
    tmp = hash_path(path).with_suffix(".sha256.tmp")
    tmp.write_text(frozen.content_hash() + "\n")
    tmp.replace(hash_path(path))
    return frozen


def load_frozen_memory(path, method: str) -> FrozenBaselineMemory:
    """The frozen memory for evaluation: refused unless frozen and equal to its recorded hash."""
    path = pathlib.Path(path)
    if not path.exists() or not hash_path(path).exists():
        raise StoreFormatError(f"{path}: no frozen {method} memory (with {hash_path(path).name}); "
                               "run build_memory for this method first")
    memory = load_memory(path, method)
    if not memory.frozen:
        raise StoreFormatError(f"{path}: not a frozen memory; freeze it after construction")
    expected = hash_path(path).read_text().strip()
    if memory.content_hash() != expected:
        raise SnapshotHashMismatch(f"{path}: memory hash {memory.content_hash()[:16]}… differs from "
                                   f"the expected {expected[:16]}…")
    return memory
