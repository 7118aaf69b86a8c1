"""Where a served backbone's replicas are, and how many requests they hold at once."""
import dataclasses
import hashlib
import logging
import os
import pathlib
import re
import threading
import time

log = logging.getLogger(__name__)


class UrlFileError(FileNotFoundError, ValueError):
    """``backbone.base_urls`` cannot be used: a URL file that does not exist, is not UTF-8 or
    lists no URL, or a URL or capacity that is wrong; ``defects`` lists each problem."""

    def __init__(self, message: str, defects: list[str] | None = None):
        super().__init__(message)
        self.defects = defects or [message]


@dataclasses.dataclass(frozen=True)
class Served:
    """The replicas' base URLs and, when the URL file says it, the sequences they hold in all;
    ``path`` is the URL file they were read from (None for URLs given directly)."""
    urls: list
    sequences: int | None = None
    path: pathlib.Path | None = None


def _is_url(text: str) -> bool:
    return bool(re.match(r"\s*[(\[]?\s*['\"]?https?://", text))


def names_urls(value) -> bool:
    """Whether ``value`` (``backbone.base_urls``) gives URLs itself rather than a URL file: a
    hosted endpoint or fixed servers, which a host's own replicas never replace (the sweep)."""
    return not isinstance(value, str) or _is_url(value)


def _split(text: str) -> list[str]:
    """URLs from a comma-separated string or a tuple/list literal of quoted URLs."""
    return [u.strip().strip("'\"") for u in text.strip().strip("()[]").split(",")
            if u.strip().strip("'\"")]


def url_defect(url: str) -> str | None:
    """What is wrong with one base URL, or None: it needs a scheme and a host."""
    match = re.match(r"(?i)(https?)://([^/\s]+)", url)
    if match is None:
        hint = f" (write http://{url})" if "://" not in url else ""
        return f"{url!r} has no http:// or https:// scheme{hint}"
    return None


def _checked(urls: list[str], where: str) -> list[str]:
    """``urls`` if each has a scheme, else ``UrlFileError`` naming every one without."""
    defects = [f"{where}: {d}" for d in map(url_defect, urls) if d]
    if defects:
        raise UrlFileError(_joined("backbone.base_urls", defects), defects)
    return urls


def _joined(what: str, defects: list[str]) -> str:
    """One line: ``what`` and each defect as its own clause."""
    count = f"{len(defects)} defects" if len(defects) > 1 else "a defect"
    return f"{what} has {count}: " + "; ".join(defects)


def read(value) -> Served:
    """The replicas ``value`` (``backbone.base_urls``) names; ``UrlFileError`` for anything that
    cannot be used (docs/gpu_host.md)."""
    if not isinstance(value, str):
        urls = _checked([str(u).strip() for u in value or () if str(u).strip()], "a URL")
    elif _is_url(value):
        urls = _checked(_split(value), "a URL")
    elif value.strip() and not re.match(r"[\w.-]+:\d+(/|$)", value.strip()):
        return _read_file(pathlib.Path(value.strip()))
    elif value.strip():   # host:port/v1, a URL without its scheme (not a file name)
        urls = _checked(_split(value), "a URL")
    else:
        urls = []
    if not urls:
        raise UrlFileError("backbone.base_urls is blank: give a URL file (launch/serve_vllm.sh "
                           "writes vllm_urls.txt) or comma-separated base URLs")
    return Served(urls)


def _read_file(path: pathlib.Path) -> Served:
    where = path.resolve()
    if not path.is_file():
        raise UrlFileError(f"backbone.base_urls names the URL file {where}, which does not exist: "
                           "start launch/serve_vllm.sh (it writes the file once every replica "
                           "answers) or give the URLs themselves")
    return parse(path.read_bytes(), where)


def parse(raw: bytes, where: pathlib.Path) -> Served:
    """The replicas a URL file's bytes list; ``UrlFileError`` with one clause per defect."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UrlFileError(f"the URL file {where} is not UTF-8 text (byte "
                           f"{raw[err.start]:#04x} at offset {err.start})") from None
    urls, sequences, defects = [], [], []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if (defect := url_defect(fields[0])) is not None:
            defects.append(f"line {number}: {defect}")
        urls.append(fields[0])
        found = [f.split("=", 1)[1] for f in fields[1:] if f.startswith("max_num_seqs=")]
        seqs = None
        if found:
            if re.fullmatch(r"\+?\d+", found[0].strip()) and int(found[0]) >= 1:
                seqs = int(found[0])
            else:
                defects.append(f"line {number}: max_num_seqs={found[0]!r} is not a whole "
                               "number ≥ 1")
        sequences.append(seqs)
    if defects:
        raise UrlFileError(_joined(f"the URL file {where}", defects), defects)
    if not urls:
        raise UrlFileError(f"the URL file {where} lists no URL")
    known = None if None in sequences else sum(sequences)
    return Served(urls, known, where)


def in_flight_limit(configured: int, served: Served) -> int:
    """Requests in flight the client allows: the configured cap, lowered to what the replicas
    hold when the URL file says it; never below 1."""
    limit = min(configured, served.sequences) if served.sequences else configured
    return max(1, int(limit))


class UrlFileWatch:
    """Re-reads a URL file when it changes; ``current()`` gives the replicas to use now.

    The file is looked at (one ``stat``) at most every ``every_s`` seconds and read again only
    when its modification time, size or inode changed; content read before (same sha256) is
    not a change. A file that is gone or cannot be read keeps the replicas read before, and
    the reason is logged once per version of the file.
    """

    def __init__(self, served: Served, every_s: float = 1.0):
        self.served = served
        self.every_s = every_s
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self._stamp = self._stat()
        self._digest = self._sha(served.path)
        self._said = None

    def _stat(self):
        """(mtime, size, inode) of the file, None when it cannot be looked at."""
        try:
            st = os.stat(self.served.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    @staticmethod
    def _sha(path) -> str:
        """sha256 of the file's bytes ("" when it cannot be read)."""
        try:
            return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()
        except OSError:
            return ""

    def current(self) -> Served:
        """The replicas to use now: the file's, re-read if it changed since."""
        now = time.monotonic()
        if now - self._checked < self.every_s:
            return self.served
        with self._lock:
            if now - self._checked < self.every_s:
                return self.served
            self._checked = now
            stamp = self._stat()
            if stamp == self._stamp:
                return self.served
            self._stamp = stamp
            try:
                raw = pathlib.Path(self.served.path).read_bytes()
                digest = hashlib.sha256(raw).hexdigest()
                if digest == self._digest:
                    return self.served
                served = parse(raw, self.served.path)
            except (OSError, UrlFileError) as err:
                if self._said != stamp:
                    self._said = stamp
                    log.warning("the URL file %s changed but cannot be used (%s); keeping the "
                                "replicas %s", self.served.path, err, ", ".join(self.served.urls))
                return self.served
            self._digest = digest
            if served.urls != self.served.urls:
                log.warning("the URL file %s changed: replicas now %s", served.path,
                            ", ".join(served.urls))
            self.served = served
            return served
