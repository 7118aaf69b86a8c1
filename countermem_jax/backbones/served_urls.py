"""Where a served backbone's replicas are, and how many requests they hold at once.

``backbone.base_urls`` is either base URLs (``http(s)://...``, comma-separated, or a tuple of
them: ``--config.backbone.base_urls='("http://a/v1", "http://b/v1")'`` is read as two URLs) or the
path of a URL file. ``launch/serve_vllm.sh`` writes that file once every replica answers, one
line per replica: ``<base URL> max_num_seqs=<M>``, M being what the replica batches at once
(vLLM's ``--max-num-seqs``). A file without that field (plain URLs, one per line) is read too.
The client keeps at most the sum of those M in flight (``in_flight_limit``): more would only
queue at the servers, under the client's total timeout per request (paper §4.1's served
gpt-oss-120b; docs/gpu_host.md). A URL file that does not exist is refused at once, naming its
absolute path, rather than becoming a connection error after retries.
"""
import dataclasses
import pathlib
import re


class UrlFileError(FileNotFoundError, ValueError):
    """``backbone.base_urls`` names a URL file that does not exist, or one without URLs."""


@dataclasses.dataclass(frozen=True)
class Served:
    """The replicas' base URLs and, when the URL file says it, the sequences they hold in all."""
    urls: list
    sequences: int | None = None


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


def read(value) -> Served:
    """The replicas ``value`` (``backbone.base_urls``) names; raises ``UrlFileError`` for a URL
    file that is missing or empty and ``ValueError`` for an empty value."""
    if not isinstance(value, str):
        urls = [str(u).strip() for u in value or () if str(u).strip()]
    elif _is_url(value):
        urls = _split(value)
    elif value.strip():
        return _read_file(pathlib.Path(value.strip()))
    else:
        urls = []
    if not urls:
        raise ValueError("backbone.base_urls is empty: give a URL file (launch/serve_vllm.sh writes "
                         "vllm_urls.txt) or comma-separated base URLs")
    return Served(urls)


def _read_file(path: pathlib.Path) -> Served:
    where = path.resolve()
    if not path.is_file():
        raise UrlFileError(f"backbone.base_urls names the URL file {where}, which does not exist: "
                           "start launch/serve_vllm.sh (it writes the file once every replica "
                           "answers) or give the URLs themselves")
    urls, sequences = [], []
    for line in path.read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        urls.append(fields[0])
        found = [f.split("=", 1)[1] for f in fields[1:] if f.startswith("max_num_seqs=")]
        sequences.append(int(found[0]) if found else None)
    if not urls:
        raise UrlFileError(f"the URL file {where} lists no URL")
    known = None if None in sequences else sum(sequences)
    return Served(urls, known)


def in_flight_limit(configured: int, served: Served) -> int:
    """Requests in flight the client allows: the configured cap, lowered to what the replicas
    hold when the URL file says it."""
    return min(configured, served.sequences) if served.sequences else configured
