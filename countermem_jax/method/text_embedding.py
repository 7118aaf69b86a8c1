"""Character n-gram hashing embedding, 512 dimensions (Appendix B.4's default embedder; its
definition in docs/method.md). It imports nothing from the package: memory, retrieval and the
selector all embed with it.
"""
import threading

import numpy as np

# Sizes fixed by the paper (Appendix B.4, C.1): 512-d retrieval embedding, 32-d projection.
DIM = 512
NGRAM_RANGE = (3, 5)
FNV_OFFSET = np.uint32(2166136261)
FNV_PRIME = np.uint32(16777619)
PROJECTION_DIM = 32
PROJECTION_SEED = 20260824


_CHUNK_BYTES = 1 << 17  # batches this size stay in cache: about twice the throughput of one batch


def embed_texts(texts: list[str] | tuple[str, ...]) -> np.ndarray:
    """Embeds texts into a float32 array of shape [len(texts), 512] (φ / E of the paper).

    Rows are unit-norm (zero for an empty text), so a dot product of two rows is their cosine
    similarity, the sim term of Eq. 8. A text's row depends on that text alone, so the rows of
    the ``CACHED_TEXTS`` texts computed last are kept and reused: a construction task run again
    in a wave, a retrieval index rebuilt after a reuse statistic changed, or the base and
    CounterMem runs of one evaluation task embed the same texts again
    (``compute_embeddings`` always computes).
    """
    out = np.empty((len(texts), DIM), dtype=np.float32)
    missing: dict[str, list[int]] = {}
    with _CACHE_LOCK:
        for i, text in enumerate(texts):
            row = _CACHE.get(text)
            if row is None:
                missing.setdefault(text, []).append(i)
            else:
                out[i] = row
    if missing:
        rows = compute_embeddings(list(missing))
        with _CACHE_LOCK:
            for (text, at), row in zip(missing.items(), rows):
                out[at] = row
                _CACHE[text] = row.copy()  # a view would keep the whole batch's array alive
            while len(_CACHE) > CACHED_TEXTS:
                del _CACHE[next(iter(_CACHE))]
    return out


# Texts whose embedding is kept (about 2 KiB each): oldest first out. Read and written under the
# lock (retention and scoring embed from checker threads too).
CACHED_TEXTS = 16384
_CACHE: dict[str, np.ndarray] = {}
_CACHE_LOCK = threading.Lock()


def compute_embeddings(texts: list[str] | tuple[str, ...]) -> np.ndarray:
    """``embed_texts`` without the cache: every text hashed (what the embedding benchmark
    times). Texts are processed in chunks of about ``_CHUNK_BYTES``; the result does not
    depend on how they are chunked."""
    # "replace": a lone surrogate embeds as "?" instead of raising
    encoded = [t.lower().encode("utf-8", "replace") for t in texts]
    out = np.zeros((len(encoded), DIM), dtype=np.float32)
    start, size = 0, 0
    for i, item in enumerate(encoded):
        if size and size + len(item) > _CHUNK_BYTES:
            out[start:i] = _embed_chunk(encoded[start:i])
            start, size = i, 0
        size += len(item)
    if start < len(encoded):
        out[start:] = _embed_chunk(encoded[start:])
    return out


def _embed_chunk(encoded: list[bytes]) -> np.ndarray:
    """Embeddings of a batch of UTF-8 byte strings, all n-grams of all texts hashed together.

    Bins are laid out as [text, bucket, sign] in one flat counter array (plus one trash bin for
    windows that straddle two texts), so a single ``bincount`` per n replaces a per-text loop.
    """
    n_docs = len(encoded)
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n_docs)
    buf = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(np.uint32)
    total = buf.size
    lo, hi = NGRAM_RANGE
    trash = n_docs * 2 * DIM  # straddling windows are counted here and dropped
    # Every window is credited to the text it starts in: base offset of that text's bins.
    doc_base = np.repeat(np.arange(n_docs, dtype=np.uint32) * np.uint32(2 * DIM), lengths)
    ends = np.cumsum(lengths)
    counts = np.zeros(trash + 1, dtype=np.int64)
    with np.errstate(over="ignore"):
        h = (FNV_OFFSET ^ buf) * FNV_PRIME  # FNV of the 1-gram at every position
        for n in range(2, hi + 1):
            if total < n:
                break
            h = (h[:-1] ^ buf[n - 1:]) * FNV_PRIME  # FNV of the n-gram starting at each position
            if n < lo:
                continue
            key = (h ^ (h >> np.uint32(9))) & np.uint32(2 * DIM - 1)
            key += doc_base[: key.size]
            # Windows starting in the last n-1 bytes of a text run into the next one.
            starts = (ends[:, None] - np.arange(1, n, dtype=np.int64)[None, :]).ravel()
            key[starts[(starts >= 0) & (starts < key.size)]] = trash
            counts += np.bincount(key, minlength=trash + 1)
    pairs = counts[:trash].reshape(n_docs, DIM, 2)
    out = (pairs[:, :, 0] - pairs[:, :, 1]).astype(np.float32)
    # L2-normalise so that a dot product is the cosine similarity of Eq. 8.
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def embed_text(text: str) -> np.ndarray:
    """One text's [512] embedding."""
    return embed_texts([text])[0]


_PROJECTION: np.ndarray | None = None


def projection_matrix() -> np.ndarray:
    """The fixed Gaussian projection P (512 -> 32, seed 20260824), scaled by 1/sqrt(32).

    It is never fitted: the same matrix serves construction, training and evaluation.
    """
    global _PROJECTION
    if _PROJECTION is None:
        rng = np.random.Generator(np.random.PCG64(PROJECTION_SEED))
        _PROJECTION = (rng.standard_normal((DIM, PROJECTION_DIM)) /
                       np.sqrt(PROJECTION_DIM)).astype(np.float32)
        _PROJECTION.setflags(write=False)
    return _PROJECTION


def project(embeddings: np.ndarray) -> np.ndarray:
    """P·E for a [..., 512] array of embeddings: the 32-d text features of the observation z_t
    (Eq. 9), for the state and for the draft action.
    """
    return embeddings @ projection_matrix()
