"""Store files: format, atomic writes, validation on load, and a lock for concurrent writers.

Format ``countermem-store`` version 1 is JSON Lines, UTF-8:
  line 1   header: {"format": "countermem-store", "version": 1, "frozen": bool, "snapshot_id": str,
           "content_hash": sha256 hex, "num_records": int, "next_seq": int, "evictions": int,
           "config": {...StoreConfig...}, "meta": {...}}   (meta: run bookkeeping, not hashed)
  line 2+  one record each (``MemoryRecord.to_json()``), in insertion order.
Writes are atomic (temp file, fsync, rename); every malformed input is a ``StoreFormatError``
naming the file, the line and the field.
"""
import contextlib
import json
import os
import pathlib
import re
import tempfile
from typing import Iterator

import filelock

from countermem_jax.method.memory import retention
from countermem_jax.method.memory.record import (MemoryRecord, RecordFieldError, check_dataclass_fields,
                                          get_field)
from countermem_jax.method.memory.store import (FrozenStore, MemoryStore, StoreConfig, content_hash)
from countermem_jax.runtime.errors import UserError

FORMAT = "countermem-store"
VERSION = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")


class StoreFormatError(UserError, ValueError):
    """A store file is missing, malformed, of another version, or fails validation.

    The message always starts with the file (and ``:line`` where one is to blame), so the binaries
    can print it as the single line a user sees, with no traceback.
    """


class SnapshotHashMismatch(StoreFormatError):
    """A frozen snapshot's content is not the one the caller (or its own header) expects.

    Raised when a file was edited after it was written, or when a phase is pointed at a store
    other than the one its workdir recorded; either way results would not be reproducible.
    """


def _header(store: MemoryStore | FrozenStore, frozen: bool) -> dict:
    """Line 1 of a store file (see the module docstring for its fields)."""
    return {"format": FORMAT, "version": VERSION, "frozen": frozen,
            "snapshot_id": store.snapshot_id, "content_hash": store.content_hash(),
            "num_records": len(store), "next_seq": store.next_seq, "evictions": store.evictions,
            "config": store.config.to_json(), "meta": dict(store.meta)}


def _write_lines(handle, lines: Iterator[str]) -> None:
    """Writes each line followed by a newline (the file ends with one)."""
    for line in lines:
        handle.write(line)
        handle.write("\n")


def write_jsonl_atomic(path: str | os.PathLike, objects) -> pathlib.Path:
    """Writes JSON objects, one per line, to a temporary file in ``path``'s folder, fsyncs it and
    renames it over ``path``: a crash at any point leaves the previous file intact. Also used by
    the baseline memories (``countermem_jax.baselines.memory``)."""
    return write_lines_atomic(
        path, (json.dumps(obj, ensure_ascii=False, sort_keys=True) for obj in objects))


def write_lines_atomic(path: str | os.PathLike, lines: Iterator[str]) -> pathlib.Path:
    """``write_jsonl_atomic`` for lines already serialised (one JSON object each)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            _write_lines(handle, lines)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    # fsync the folder too, so the rename itself survives a power loss.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def _read_lines(path: pathlib.Path, what: str = "store") -> list[str]:
    """The file's lines as text; a directory, an unreadable file or bytes that are not UTF-8 are a
    ``StoreFormatError`` naming the file (and the line and column for bad bytes)."""
    if path.is_dir():
        raise StoreFormatError(f"{path}: is a directory, not a {what} file")
    if not path.exists():
        raise StoreFormatError(f"{path}: no such {what} file")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise StoreFormatError(f"{path}: cannot be read ({err.strerror or err})") from None
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    text = []
    for lineno, line in enumerate(lines, start=1):
        try:
            text.append(line.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise StoreFormatError(f"{path}:{lineno}: not UTF-8 text (byte {line[err.start]:#04x} "
                                   f"at column {err.start + 1})") from None
    return text


def read_jsonl(path: pathlib.Path, what: str = FORMAT) -> list[tuple[int, dict]]:
    """(line number, object) for every line of a JSON Lines file (the store, the baselines'
    memories); every malformed input is a ``StoreFormatError`` naming file and line."""
    raw_lines = _read_lines(path, what)
    if not raw_lines:
        raise StoreFormatError(f"{path}: empty file (expected a {what} header on line 1)")
    return [(lineno, _parse_json(path, lineno, line)) for lineno, line in enumerate(raw_lines, 1)]


def save_store(store: MemoryStore | FrozenStore, path: str | os.PathLike) -> pathlib.Path:
    """Atomically writes ``store`` to ``path``; returns the path.

    A ``FrozenStore`` is written with ``"frozen": true`` and comes back frozen from ``load_store``.
    """
    frozen = isinstance(store, FrozenStore)
    header = json.dumps(_header(store, frozen), ensure_ascii=False, sort_keys=True)
    return write_lines_atomic(path, [header] + [r.json_text(canonical=False)
                                               for r in store.records])


def load_store(path: str | os.PathLike) -> MemoryStore | FrozenStore:
    """Loads and validates a store file; a frozen file comes back as a ``FrozenStore``.

    Beyond per-field checks it rejects duplicate record ids, a record count differing from the
    header (a truncated file), more records than the capacity allows, and a content hash that
    does not match the header. Every failure is a ``StoreFormatError`` naming file and line.
    """
    path = pathlib.Path(path)
    (_, header), *lines = read_jsonl(path, "store")
    config = _check_header(path, header)
    records, seen = [], set()
    for lineno, obj in lines:
        try:
            record = MemoryRecord.from_json(obj)
        except RecordFieldError as err:
            raise StoreFormatError(f"{path}:{lineno}: record {obj.get('record_id', '?')!r}: "
                                   f"{err}") from None
        if record.record_id in seen:
            raise StoreFormatError(f"{path}:{lineno}: field 'record_id': duplicate id "
                                   f"{record.record_id!r}")
        seen.add(record.record_id)
        records.append(record)
    if len(records) != header["num_records"]:
        raise StoreFormatError(f"{path}: header says {header['num_records']} records, file has "
                               f"{len(records)} (truncated or edited file)")
    if len(records) > config.capacity:
        raise StoreFormatError(f"{path}:1: field 'num_records': {len(records)} records exceed the "
                               f"store's capacity {config.capacity}")
    actual = content_hash(config, records)
    if actual != header["content_hash"]:
        raise SnapshotHashMismatch(f"{path}: content hash {actual[:16]}… does not match the header's "
                                   f"{header['content_hash'][:16]}… (the file was modified)")
    cls = FrozenStore if header["frozen"] else MemoryStore
    return cls(config, records, header["snapshot_id"], header["next_seq"], header["evictions"],
               header.get("meta") or {})


def load_frozen(path: str | os.PathLike, expected_hash: str | None = None) -> FrozenStore:
    """Loads a frozen snapshot for selector training or evaluation, checking its hash.

    ``expected_hash`` is the hash the construction phase recorded; passing it makes the check
    "this is the store construction wrote", not merely "this file is internally consistent".
    """
    store = load_store(path)
    if not isinstance(store, FrozenStore):
        raise StoreFormatError(f"{path}: not a frozen snapshot; freeze the store after construction "
                               "before training or evaluating on it")
    if expected_hash is not None and store.content_hash() != expected_hash:
        raise SnapshotHashMismatch(f"{path}: snapshot hash {store.content_hash()[:16]}… differs from "
                                   f"the expected {expected_hash[:16]}…")
    return store


@contextlib.contextmanager
def locked_store(path: str | os.PathLike, config: StoreConfig | None = None,
                 timeout: float = 120.0) -> Iterator[MemoryStore]:
    """Read-modify-write under an exclusive file lock.

    Loads the newest version (or starts an empty store with ``config``, which a path holding no
    store needs), yields it, and saves it atomically when the block exits normally; if the block
    raises, nothing is written.
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(path) + ".lock", timeout=timeout):
        if not path.exists() and config is None:
            raise ValueError(f"{path}: no store yet, and no StoreConfig to start one with")
        store = load_store(path) if path.exists() else MemoryStore(config)
        if isinstance(store, FrozenStore):
            store.propose()  # raises FrozenStoreError with the snapshot id
        yield store
        save_store(store, path)


def _parse_json(path: pathlib.Path, lineno: int, line: str) -> dict:
    """One line → JSON object, or a ``StoreFormatError`` with line and column.

    ``RecursionError`` is caught too: a hostile line of ten thousand ``[`` must not crash the
    loader with a traceback.
    """
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise StoreFormatError(f"{path}:{lineno}: not valid JSON ({err.msg} at column "
                               f"{err.colno})") from None
    except RecursionError:
        raise StoreFormatError(f"{path}:{lineno}: not valid JSON (nested too deeply)") from None
    if not isinstance(obj, dict):
        raise StoreFormatError(f"{path}:{lineno}: expected a JSON object, got "
                               f"{type(obj).__name__}")
    # a "\udcff" escape is valid JSON but no character: the text would not be UTF-8
    try:
        field = _lone_surrogate(obj) if _SURROGATE_ESCAPE.search(line) else None
    except RecursionError:
        raise StoreFormatError(f"{path}:{lineno}: not valid JSON (nested too deeply)") from None
    if field is not None:
        raise StoreFormatError(f"{path}:{lineno}: field {field!r}: not valid UTF-8 text (a lone "
                               "surrogate escape)")
    return obj


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate(value, prefix: str = "") -> str | None:
    """The dotted path of the first key or string in ``value`` holding a lone surrogate (a
    pair of escapes decodes to one character), or None."""
    if isinstance(value, str):
        return (prefix or "<value>") if re.search("[\ud800-\udfff]", value) else None
    items = (value.items() if isinstance(value, dict) else enumerate(value)
             if isinstance(value, list) else ())
    for key, item in items:
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(key, str) and re.search("[\ud800-\udfff]", key):
            return name
        if (found := _lone_surrogate(item, name)) is not None:
            return found
    return None


def _check_header(path: pathlib.Path, header: dict) -> StoreConfig:
    """Checks every header field (type, range, the store config inside); returns the config."""
    if header.get("format") != FORMAT:
        raise StoreFormatError(f"{path}:1: field 'format': expected {FORMAT!r}, got "
                               f"{header.get('format')!r}")
    if header.get("version") != VERSION:
        raise StoreFormatError(f"{path}:1: field 'version': this build reads version {VERSION}, "
                               f"the file is version {header.get('version')!r}")
    try:
        for key, typ in (("frozen", bool), ("snapshot_id", str), ("content_hash", str),
                         ("num_records", int), ("next_seq", int), ("evictions", int),
                         ("config", dict)):
            value = get_field(header, key, (typ,))
            if typ is int and value < 0:
                raise RecordFieldError(key, f"must be >= 0, got {value}")
        if not _SHA256.fullmatch(header["content_hash"]):
            raise RecordFieldError("content_hash", "expected 64 lower-case hex digits")
        if "meta" in header and not isinstance(header["meta"], (dict, type(None))):
            raise RecordFieldError("meta", f"expected dict, got {type(header['meta']).__name__}")
        done = (header.get("meta") or {}).get("processed_tasks", [])
        # a string would be read as a set of characters: every task would be built again
        if not isinstance(done, list) or not all(isinstance(t, str) for t in done):
            raise RecordFieldError("meta.processed_tasks", "expected a list of task ids, got "
                                   f"{json.dumps(done)[:60]}")
        check_dataclass_fields(header["config"], StoreConfig, "config.")
        if header["config"]["retention"] not in retention.RULES:
            raise RecordFieldError("config.retention", f"{header['config']['retention']!r} is not "
                                   f"one of {', '.join(retention.RULES)}")
        if header["config"]["capacity"] < 1:
            raise RecordFieldError("config.capacity", "must be >= 1")
    except RecordFieldError as err:
        raise StoreFormatError(f"{path}:1: header: {err}") from None
    return StoreConfig.from_json(header["config"])
