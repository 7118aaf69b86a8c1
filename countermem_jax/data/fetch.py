"""Download, verify and unpack a benchmark's release into the layout the loaders read."""
import dataclasses
import datetime
import hashlib
import http.client
import io
import json
import os
import pathlib
import re
import shutil
import tarfile
import urllib.error
import urllib.request

from countermem_jax.data import registry
from countermem_jax.runtime.file_hash import sha256_file

# Written into every installed top-level folder: what was fetched, from where, how verified.
RECEIPT = ".countermem_fetch.json"


class FetchError(RuntimeError):
    """A download or install failed; the message names the URL or file and, for an interrupted
    download, says that rerunning the same command resumes it.
    """
    pass


class ChecksumMismatch(FetchError):
    """Downloaded content differs from the sha256 recorded in the registry; nothing was installed
    and the bad archive was deleted, so a rerun downloads afresh.
    """
    pass


@dataclasses.dataclass
class FetchReport:
    """What ``fetch`` installed: the data entry, the root, how many files were verified by hash,
    which files were installed without a recorded hash, and the top-level folders replaced.
    """
    name: str
    root: pathlib.Path
    verified: int = 0
    unverified: list = dataclasses.field(default_factory=list)
    folders: list = dataclasses.field(default_factory=list)


def download(url: str, target: pathlib.Path, timeout: float = 60.0, chunk: int = 1 << 16,
             opener=None) -> pathlib.Path:
    """``url`` to ``target``, resuming ``target.part`` when the server honours Range.

    Returns ``target``, which exists only once the whole file arrived (the part is renamed
    at the end). Network failures, HTTP errors and short transfers are a ``FetchError``; the
    part file is kept so the next call resumes. ``opener`` replaces urllib's default opener.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "countermem-data/1"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    open_ = (opener or urllib.request.build_opener()).open
    try:
        response = open_(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:   # the part is already complete (or bogus): start over
            part.unlink()
            return download(url, target, timeout, chunk, opener)
        raise FetchError(f"{url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        raise FetchError(f"{url}: {getattr(err, 'reason', err)}") from None
    with response:
        if have and response.status != 206:
            have = 0                   # the server sent the whole file: restart the part
        length = response.headers.get("Content-Length")
        expected = have + int(length) if length is not None else None
        with open(part, "ab" if have else "wb") as f:
            try:
                while True:
                    block = response.read(chunk)
                    if not block:
                        break
                    f.write(block)
            except (http.client.IncompleteRead, OSError) as err:
                raise FetchError(f"{url}: download interrupted ({type(err).__name__}) after "
                                 f"{f.tell()} bytes; run the same command again to "
                                 "resume") from None
    got = part.stat().st_size
    if expected is not None and got != expected:
        raise FetchError(f"{url}: connection ended after {got} of {expected} bytes; run the same "
                         "command again to resume")
    os.replace(part, target)
    return target


def _dest_for(member: str, source: dict, explicit: dict) -> str | None:
    """Layout path of an archive member, or None if the entry does not install it.

    An explicit per-file mapping wins; otherwise the first ``include`` prefix rule that
    matches maps it, unless the result falls under an ``exclude`` prefix.
    """
    if member in explicit:
        return explicit[member]
    for src_prefix, dest_prefix in source.get("include", ()):
        if src_prefix == "" or member == src_prefix or (
                src_prefix.endswith("/") and member.startswith(src_prefix)):
            dest = dest_prefix + member[len(src_prefix):] if src_prefix else dest_prefix + member
            if any(dest == e or (e.endswith("/") and dest.startswith(e))
                   for e in source.get("exclude", ())):
                return None
            return dest
    return None


def _safe(rel: str) -> bool:
    """True for a relative path that stays inside its root (no absolute path, no ``..``)."""
    parts = pathlib.PurePosixPath(rel).parts
    return bool(parts) and not rel.startswith("/") and ".." not in parts


def _extract(archive: pathlib.Path, source: dict, staging: pathlib.Path) -> dict[str, str]:
    """Unpacks the source's files into ``staging``; returns layout path -> sha256."""
    # A file record is [sha256, size] or [sha256, size, archive path]; the third element pins
    # a file whose layout path is not derived from an include prefix.
    explicit = {v[2]: dest for dest, v in source["files"].items() if len(v) > 2}
    nested = source.get("nested")
    out = {}
    try:
        tar = tarfile.open(archive, "r:*")
    except (tarfile.TarError, OSError) as err:
        raise FetchError(f"{archive}: not a readable tar archive ({err})") from None
    with tar:
        for member in tar:
            if not member.isfile():
                continue
            # GitHub archives wrap everything in one <repo>-<commit>/ folder: strip it.
            name = member.name.split("/", 1)[1] if "/" in member.name else ""
            if nested and name == nested["archive"]:
                data = tar.extractfile(member).read()
                out.update(_extract_nested(data, nested, staging))
                continue
            dest = _dest_for(name, source, explicit)
            if dest is None:
                continue
            if not _safe(dest) or not _safe(name):
                raise FetchError(f"{archive}: unsafe path {member.name!r}")
            out[dest] = _write(staging / dest, tar.extractfile(member))
    return out


def _extract_nested(data: bytes, nested: dict, staging: pathlib.Path) -> dict[str, str]:
    """Unpacks the files of an archive inside the archive (flattened to their base names, filtered
    by suffix) into ``staging``; returns layout path → sha256.
    """
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as inner:
        for member in inner:
            base = pathlib.PurePosixPath(member.name).name
            if member.isfile() and base.endswith(nested.get("suffix", "")) and _safe(base):
                out[nested["dest"] + base] = _write(staging / nested["dest"] / base,
                                                    inner.extractfile(member))
    return out


def _write(path: pathlib.Path, stream) -> str:
    """Streams ``stream`` into ``path`` (1 MiB blocks); returns the sha256 of what was written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with open(path, "wb") as f:
        for block in iter(lambda: stream.read(1 << 20), b""):
            h.update(block)
            f.write(block)
    return h.hexdigest()


def _check(name: str, source: dict, got: dict[str, str]) -> None:
    """Refuses the unpacked files unless every recorded file is present with its recorded sha256.

    Files without a recorded hash are not judged here; ``fetch`` reports them as unverified.
    """
    bad = [d for d, v in source["files"].items() if d in got and got[d] != v[0]]
    missing = [d for d in source["files"] if d not in got]
    if bad or missing:
        lines = [f"{name}: {len(bad)} file(s) differ from their recorded sha256 and "
                 f"{len(missing)} recorded file(s) are missing from {source['url']}"]
        lines += [f"  sha256 mismatch: {d}" for d in bad[:5]]
        lines += [f"  missing: {d}" for d in missing[:5]]
        raise ChecksumMismatch("\n".join(lines) + "\nnothing was installed")


def _post(kind: str, staging: pathlib.Path) -> None:
    """Writes the manifests the SAT and SMT loaders read, derived from the files themselves."""
    if kind == "satlib_manifest":
        root = staging / "satlib"
        rows = []
        for path in sorted(root.glob("*/*.cnf")):
            family = path.parent.name
            # SATLIB's naming: uf* and flat* instances are satisfiable, uuf* unsatisfiable.
            rows.append({"file": f"{family}/{path.name}", "family": family,
                         "expected": "UNSAT" if family.startswith("uuf") else "SAT"})
        (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif kind == "smtlib_manifest":
        root = staging / "smtlib"
        rows = []
        for path in sorted(root.glob("*/*.smt2")):
            status = re.search(r"\(set-info\s+:status\s+(sat|unsat)\s*\)", path.read_text())
            if status:
                parts = path.stem.split("__")
                rows.append({"file": f"{path.parent.name}/{path.name}", "logic": path.parent.name,
                             "status": status.group(1), "family": parts[1] if len(parts) > 2 else ""})
        (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif kind:
        raise FetchError(f"unknown post step {kind!r} in the data registry")


def _install(staging: pathlib.Path, root: pathlib.Path) -> list[str]:
    """Moves each top-level folder of ``staging`` into ``root`` (old copy renamed away first)."""
    folders = sorted(p.name for p in staging.iterdir() if p.is_dir())
    for folder in folders:
        final, old = root / folder, root / f".old-{folder}-{os.getpid()}"
        if final.exists():
            os.replace(final, old)
        os.replace(staging / folder, final)
        shutil.rmtree(old, ignore_errors=True)
    return folders


def fetch(name: str, root: pathlib.Path, allow_unverified: bool = False, opener=None) -> FetchReport:
    """Downloads, verifies and installs ``name``'s files under ``root``.

    An entry with no pinned hash at all is refused unless ``allow_unverified``. Each installed
    folder receives a receipt (``.countermem_fetch.json``) naming the sources and the verified
    and unverified files. ``opener`` replaces urllib's (tests serve archives from loopback).
    """
    key = registry.data_key(name)
    entry = registry.load()[key]
    if not entry["sources"]:
        raise FetchError(f"{key}: no downloadable release is recorded.\n{entry.get('instead', '')}")
    unpinned = [s for s in entry["sources"] if not s["files"] and not s.get("archive_sha256")]
    if unpinned and not allow_unverified:
        raise FetchError(f"{key}: no sha256 is recorded for {unpinned[0]['url']} or any file in it, "
                         "so its content cannot be verified; rerun with --allow_unverified to "
                         "accept it as is")
    root = pathlib.Path(root).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    # Everything is unpacked and checked here first; ROOT changes only in ``_install``.
    staging = root / f".staging-{key}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    report = FetchReport(key, root)
    try:
        for i, source in enumerate(entry["sources"]):
            # Archives are kept by repository and commit, so a rerun (or another entry from the same
            # release) reuses the download.
            archive = root / ".downloads" / f"{source['repo'].replace('/', '+')}@{source['commit']}.tar.gz"
            if not archive.exists():
                download(source["url"], archive, opener=opener)
            if source.get("archive_sha256") and sha256_file(archive) != source["archive_sha256"]:
                archive.unlink()
                raise ChecksumMismatch(f"{key}: {source['url']} does not match its recorded "
                                       "archive sha256; nothing was installed")
            got = _extract(archive, source, staging)
            try:
                _check(key, source, got)
            except ChecksumMismatch:
                archive.unlink()
                raise
            report.verified += sum(1 for d in got if d in source["files"])
            report.unverified += sorted(d for d in got if d not in source["files"])
        _post(entry.get("post", ""), staging)
        for folder in sorted(p for p in staging.iterdir() if p.is_dir()):
            (folder / RECEIPT).write_text(json.dumps({
                "data": key, "fetched": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                "sources": [{"url": s["url"], "commit": s["commit"]} for s in entry["sources"]],
                "verified_files": report.verified, "unverified_files": report.unverified},
                indent=1))
        report.folders = _install(staging, root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report


def verify(name: str, root: pathlib.Path) -> tuple[int, list[str], list[str]]:
    """(files matching, files differing, files missing) against the recorded sha256s."""
    entry = registry.entry(name)
    ok, bad, missing = 0, [], []
    for dest, (sha, _) in registry.manifest(entry).items():
        path = pathlib.Path(root) / dest
        if not path.is_file():
            missing.append(dest)
        elif sha256_file(path) != sha:
            bad.append(dest)
        else:
            ok += 1
    return ok, bad, missing
