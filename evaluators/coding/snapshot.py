"""Cheap working copies of a repository snapshot: directories are created, files hard-linked."""
import os
import pathlib
import shutil
import stat
import tempfile


def _linkable(st: os.stat_result, sandbox_uid: int) -> bool:
    return st.st_uid != sandbox_uid and st.st_uid < 2_000_000_000 and \
        not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def make_copy(source: str | os.PathLike, parent: str | None = None, sandbox_uid: int = 65534,
              skip=("__pycache__", ".pytest_cache", ".git"), hidden=()) -> pathlib.Path:
    source = pathlib.Path(source)
    root = pathlib.Path(tempfile.mkdtemp(prefix="countermem-copy-", dir=parent))
    root.chmod(0o755)
    hidden = {pathlib.PurePosixPath(h) for h in hidden}
    for dirpath, dirnames, filenames in os.walk(source):
        rel = pathlib.Path(dirpath).relative_to(source)
        dirnames[:] = [d for d in dirnames if d not in skip and
                       pathlib.PurePosixPath(rel, d) not in hidden]
        target_dir = root / rel
        target_dir.mkdir(exist_ok=True)
        for name in filenames:
            src = pathlib.Path(dirpath) / name
            dst = target_dir / name
            st = src.lstat()
            if stat.S_ISLNK(st.st_mode) or pathlib.PurePosixPath(rel, name) in hidden:
                continue  # links could point anywhere; snapshots are used without them
            if _linkable(st, sandbox_uid):
                try:
                    os.link(src, dst)
                    continue
                except OSError:
                    pass
            shutil.copy2(src, dst)
    return root


def replace_file(copy_root: pathlib.Path, relpath: str, content: str) -> None:
    """Writes a file of the copy as a new inode (never through a hard link)."""
    target = safe_path(copy_root, relpath)
    tmp = target.with_name(f".{target.name}.countermem-new")
    tmp.write_text(content, encoding="utf-8")
    os.replace(tmp, target)


def safe_path(copy_root: pathlib.Path, relpath: str) -> pathlib.Path:
    """``relpath`` inside the copy; ValueError for absolute paths or ones that climb out."""
    rel = pathlib.PurePosixPath(relpath)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError(f"path {relpath!r} is not inside the repository")
    return copy_root.joinpath(*rel.parts)


def remove_copy(path: pathlib.Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
