"""The synthetic graph of :mod:`gnntrain.data.synthetic`, written straight to chunks on disk.

:func:`write_synthetic_chunks` produces the chunk directory (:mod:`partition.chunked`) of
exactly the graph :func:`~gnntrain.data.synthetic.generate` builds (same edges, rows sorted
and without repeats, same features, labels and split, same content hash) without ever
holding the edge list: edges are generated per block of source nodes, both directions are
appended to one spill file per row range of destinations, then each row range is sorted,
deduplicated and written as edge chunks in CSR order, and its node rows (features
generated per block) as one node chunk. Spill files and edge chunks hold ids as
:func:`~partition.chunked.id_dtype` (int32 below 2^31 nodes). Memory: a few ``[N]`` arrays
(classes, weights, alias tables, split codes) plus the edges of one row range.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gnntrain.data.synthetic import BLOCK, _block_edges, _centroids, _feature_rows, _plan, _split
from partition.chunked import SPLIT_CODES, ChunkedGraph, ChunkWriter, id_dtype

if TYPE_CHECKING:
    from gnntrain.config import SyntheticConfig

__all__ = ["write_synthetic_chunks"]


def write_synthetic_chunks(cfg: SyntheticConfig, path: str | Path, *, name: str = "synthetic",
                           rows_per_chunk: int = 1 << 17, edges_per_chunk: int = 1 << 22) -> ChunkedGraph:
    """Write the graph of ``cfg`` as chunks under ``path`` (which must not exist).

    ``rows_per_chunk`` is rounded up to a multiple of the generator's block (16,384 rows).
    """
    n = cfg.nodes
    rows = max(BLOCK, -(-rows_per_chunk // BLOCK) * BLOCK)
    ranges = -(-n // rows)
    id_width = id_dtype(n)
    y, w, sampler = _plan(cfg)
    writer = ChunkWriter(path, name=name, num_nodes=n, num_features=cfg.features, num_classes=cfg.classes)
    spill = writer.tmp / ".spill"
    spill.mkdir()
    try:
        files = [((spill / f"dst-{r}.bin").open("ab"), (spill / f"src-{r}.bin").open("ab"))
                 for r in range(ranges)]
        for a in range(0, n, BLOCK):  # pass 1: every edge, both directions, to its row range
            u, v = _block_edges(cfg, a, w, y, sampler)
            dst, src = np.concatenate([v, u]).astype(id_width), np.concatenate([u, v]).astype(id_width)
            order = np.argsort(dst // rows, kind="stable")
            cuts = np.searchsorted(dst[order] // rows, np.arange(ranges + 1))
            for r in range(ranges):
                sel = order[cuts[r]:cuts[r + 1]]
                files[r][0].write(dst[sel].tobytes())
                files[r][1].write(src[sel].tobytes())
        for fd, fs in files:
            fd.close()
            fs.close()
        del w, sampler
        codes = np.zeros(n, dtype=np.int8)
        for s, ids in zip(SPLIT_CODES, _split(cfg), strict=True):
            codes[ids] = SPLIT_CODES[s]
        centroids = _centroids(cfg)
        for r in range(ranges):  # pass 2: one row range at a time
            dst = np.fromfile(spill / f"dst-{r}.bin", dtype=id_width)
            src = np.fromfile(spill / f"src-{r}.bin", dtype=id_width)
            (spill / f"dst-{r}.bin").unlink()
            (spill / f"src-{r}.bin").unlink()
            order = np.lexsort((src, dst))
            dst, src = dst[order], src[order]
            keep = np.ones(dst.shape[0], dtype=bool)
            keep[1:] = (dst[1:] != dst[:-1]) | (src[1:] != src[:-1])
            dst, src = dst[keep], src[keep]
            for e in range(0, dst.shape[0], edges_per_chunk):
                writer.add_edges(src[e:e + edges_per_chunk], dst[e:e + edges_per_chunk])
            del dst, src, order, keep
            lo, hi = r * rows, min((r + 1) * rows, n)
            x = np.empty((hi - lo, cfg.features), dtype=np.float32)
            for a in range(lo, hi, BLOCK):
                b = min(a + BLOCK, hi)
                _feature_rows(cfg, centroids, a, y[a:b], x[a - lo:b - lo])
            writer.add_nodes(lo, x, y[lo:hi].astype(np.int64), codes[lo:hi])
        shutil.rmtree(spill)
    except BaseException:
        writer.abort()
        raise
    return writer.finish()
