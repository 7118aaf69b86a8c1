"""The data registry (``sources.json``, the ONE file that records where every benchmark's files
come from): per data entry, the pinned archive URLs, the archive sha256 where it is known (it is
``null`` with a note where it is not), which archive paths unpack to which layout paths, and the
sha256 and size of every file whose content this project knows. Benchmarks name their entry in
the benchmark registry (``countermem_jax/domains``), e.g. vericoding_dafny -> "vericoding"."""
import functools
import json
import pathlib

REGISTRY_FILE = pathlib.Path(__file__).with_name("sources.json")


class UnknownData(ValueError):
    """A name is neither a data entry nor a benchmark with downloadable data; the message lists
    both.
    """
    pass


@functools.lru_cache(maxsize=1)
def load() -> dict:
    """The ``benchmarks`` mapping of ``sources.json`` (entry name → entry), read once per process.

    The file carries a format name and version; anything else is refused rather than misread.
    """
    reg = json.loads(REGISTRY_FILE.read_text())
    if reg.get("format") != "countermem-data-registry" or reg.get("version") != 1:
        raise ValueError(f"{REGISTRY_FILE}: not a countermem-data-registry v1 file")
    return reg["benchmarks"]


def data_key(name: str) -> str:
    """The data entry for a benchmark or data name (``vericoding_verus`` -> ``vericoding``)."""
    entries = load()
    if name in entries:
        return name
    from countermem_jax import domains
    spec = domains.BENCHMARKS.get(name)
    if spec is not None and spec.data in entries:
        return spec.data
    if spec is not None:
        raise UnknownData(f"{name}: needs no download (its tasks are generated)")
    raise UnknownData(f"unknown benchmark {name!r}; data entries: {', '.join(sorted(entries))}; "
                      f"benchmarks: {', '.join(sorted(domains.BENCHMARKS))}")


def entry(name: str) -> dict:
    """The registry entry (sources, files, notes) of a data or benchmark name."""
    return load()[data_key(name)]


def manifest(entry_: dict) -> dict[str, tuple[str, int]]:
    """Layout path -> (sha256, size) for every file of the entry with a known hash."""
    return {dest: (v[0], v[1]) for s in entry_["sources"] for dest, v in s["files"].items()}
