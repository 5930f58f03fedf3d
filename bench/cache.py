"""Hit rate of remote feature reads vs cache size, per policy, against the oracle.

    python -m bench.cache            # 100k-node power-law graph, 4 parts
    python -m bench.cache --smoke    # 10k nodes (seconds)

Setting: the synthetic power-law graph is cut into 4 parts (``partition.assign_parts``,
METIS, when the partition package provides it, else contiguous id ranges; the output
says which). Worker p samples its own training nodes (fanouts [15, 10, 5], batch 1024);
every input node owned by another part is a remote read. Sampling uses the whole-graph
CSR, which by the determinism contract draws exactly what the distributed sampler draws.

Policies, at 1 / 5 / 10 / 20 % of the remote rows (N minus the part's own rows):
``degree`` (PaGraph, highest out-degree first), ``presample`` (GNNLab PreSC: count one
sampling epoch under other keys, keep the hottest), ``lru`` and ``fifo`` (warmed by one
epoch, then measured). The measured epoch is the same for all; ``oracle`` is the best
static cache for that very epoch (its most accessed rows), the baseline of the ratios.
Hit rates are pooled over the 4 workers (total hits / total remote reads).

Exit status 1 when a check fails (``bench.harness.verdict``): presample >= 0.9 x oracle at every
size (the target), no static policy above the oracle (the best static cache of that
capacity for that epoch) and the oracle's rate not falling as the cache grows.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bench.harness.cli import bench_parser
from bench.harness.paths import out_path
from bench.harness.verdict import Check, check, finish
from gnntrain.config import SyntheticConfig
from gnntrain.data.synthetic import generate
from partition.graph import Graph
from samplers import (
    CSRSource,
    FeatureCache,
    FIFOCache,
    LRUCache,
    NeighborSampler,
    StaticCache,
    count_accesses,
    degree_cache_ids,
    oracle_hit_rate,
    out_degrees,
    presample_ids,
    resolve_capacity,
)

FANOUTS = [15, 10, 5]
BATCH = 1024
SIZES = [0.01, 0.05, 0.10, 0.20]
POLICIES = ["degree", "presample", "lru", "fifo", "oracle"]
PRESAMPLE_KEY, WARM_KEY, MEASURE_KEY = 101, 202, 303


def split_parts(g: Graph, k: int) -> tuple[np.ndarray, str]:
    """Part of every node and how it was obtained."""
    try:
        from partition import PartitionConfig, assign_parts
    except ImportError:
        pass
    else:
        return np.asarray(assign_parts(g, PartitionConfig(parts=k))), "partition.assign_parts (METIS)"
    bounds = np.linspace(0, g.num_nodes, k + 1).astype(np.int64)
    return np.searchsorted(bounds, np.arange(g.num_nodes), side="right") - 1, "contiguous id ranges"


def _epoch_remote(sampler: NeighborSampler, seeds: np.ndarray, key: int,
                  remote: np.ndarray) -> list[np.ndarray]:
    """Remote input nodes of every batch of one epoch (what the feature fetch asks for)."""
    return [b.input_nodes[remote[b.input_nodes]] for b in
            sampler.iter_batches(seeds, BATCH, key)]


def _replay(cache: FeatureCache, batches: list[np.ndarray], x: np.ndarray, admit: bool) -> None:
    """What a worker's feature fetch does per batch: look up, fetch the misses, offer them."""
    for ids in batches:
        hit, _ = cache.lookup(ids)
        if admit:  # static caches ignore inserts: skip the (simulated) remote fetch
            miss = ids[~hit]
            cache.insert(miss, x[miss])


def run_part(g: Graph, parts: np.ndarray, p: int, sampler: NeighborSampler,
             odeg: np.ndarray) -> dict[str, Any]:
    remote = parts != p
    seeds = g.train_idx[parts[g.train_idx] == p]
    n_remote = int(remote.sum())
    row_bytes = 4 * g.num_features
    measured = _epoch_remote(sampler, seeds, MEASURE_KEY, remote)
    acc = np.concatenate(measured)
    warm = _epoch_remote(sampler, seeds, WARM_KEY, remote)
    pre = count_accesses(sampler, seeds, BATCH, 1, PRESAMPLE_KEY, only=lambda v: remote[v])
    cand = np.flatnonzero(remote)
    out: dict[str, Any] = {"part": p, "seeds": int(seeds.size), "remote_rows": n_remote,
                           "remote_reads": int(acc.size), "hits": {}}
    for size in SIZES:
        cap = resolve_capacity(size, n_remote, row_bytes)
        hits: dict[str, int] = {}
        for policy in POLICIES:
            if policy == "oracle":
                hits[policy] = round(oracle_hit_rate(acc, cap) * acc.size)
                continue
            cache: FeatureCache
            if policy in ("degree", "presample"):
                ids = degree_cache_ids(cand, odeg[cand], cap) if policy == "degree" \
                    else presample_ids(pre, cap)
                cache = StaticCache(ids, g.x[ids])
            else:
                cache = (LRUCache if policy == "lru" else FIFOCache)(cap, g.num_features)
                _replay(cache, warm, g.x, admit=True)
                cache.stats.reset()
            _replay(cache, measured, g.x, admit=policy in ("lru", "fifo"))
            assert cache.stats.lookups == acc.size
            hits[policy] = cache.stats.hits
        out["hits"][str(size)] = {"capacity": cap, **hits}
    return out


def checks(table: list[dict[str, Any]]) -> list[Check]:
    """The correctness checks on the pooled hit rates (``table`` rows, sizes ascending)."""
    out: list[Check] = []
    for row in table:
        rate, size = row["hit_rate"], f"{row['size']:.0%}"
        out.append(check(f"presample >= 0.9 x oracle at {size}", row["presample_over_oracle"] >= 0.9,
                         f"presample {rate['presample']:.4f}, oracle {rate['oracle']:.4f}, "
                         f"ratio {row['presample_over_oracle']:.3f}"))
        for pol in ("degree", "presample"):
            out.append(check(f"{pol} (static) <= oracle at {size}", rate[pol] <= rate["oracle"] + 1e-12,
                             f"{pol} {rate[pol]:.4f}, oracle {rate['oracle']:.4f}"))
    oracle = [row["hit_rate"]["oracle"] for row in table]
    out.append(check("oracle hit rate does not fall as the cache grows",
                     all(b >= a for a, b in zip(oracle, oracle[1:], strict=False)),
                     f"oracle by size {[round(o, 4) for o in oracle]}"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="10k-node graph (seconds)")
    ap.add_argument("--nodes", type=int, default=None, help="override the graph size")
    args = ap.parse_args(argv)
    nodes = args.nodes or (10_000 if args.smoke else 100_000)
    t0 = time.perf_counter()
    g = generate(SyntheticConfig(nodes=nodes, avg_degree=20.0, features=8, classes=8,
                                 power_law=2.5, seed=0), name=f"powerlaw-{nodes}")
    parts, how = split_parts(g, 4)
    print(f"{g.num_nodes:,} nodes, {g.num_edges:,} edges, 4 parts by {how} "
          f"({time.perf_counter() - t0:.1f}s); fanouts {FANOUTS}, batch {BATCH}")
    sampler = NeighborSampler(CSRSource(g.indptr, g.indices), FANOUTS)
    odeg = out_degrees(g.indices, g.num_nodes)
    per_part = [run_part(g, parts, p, sampler, odeg) for p in range(4)]
    reads = sum(r["remote_reads"] for r in per_part)
    print(f"remote reads in the measured epoch: {reads:,} "
          f"(over {sum(r['seeds'] for r in per_part):,} training seeds)\n")
    print(f"{'size':>5} {'rows/part':>10} " + " ".join(f"{p:>9}" for p in POLICIES)
          + "   presample/oracle  lru/oracle")
    table: list[dict[str, Any]] = []
    for size in SIZES:
        rate = {pol: sum(r["hits"][str(size)][pol] for r in per_part) / reads for pol in POLICIES}
        cap = int(np.mean([r["hits"][str(size)]["capacity"] for r in per_part]))
        ratio = rate["presample"] / rate["oracle"] if rate["oracle"] else 0.0
        print(f"{size:>5.0%} {cap:>10,} " + " ".join(f"{rate[p]:>9.3f}" for p in POLICIES)
              + f"   {ratio:>15.3f}  {rate['lru'] / rate['oracle'] if rate['oracle'] else 0:>10.3f}")
        table.append({"size": size, "capacity_mean": cap, "hit_rate": rate,
                      "presample_over_oracle": ratio})
    result: dict[str, Any] = {"nodes": g.num_nodes, "edges": g.num_edges, "split": how,
                              "fanouts": FANOUTS, "batch_size": BATCH, "table": table, "parts": per_part,
                              "keys": {"presample": PRESAMPLE_KEY, "warm": WARM_KEY, "measure": MEASURE_KEY}}
    print()
    return finish("cache", checks(table), result,
                  out_path("cache", smoke=True) if args.smoke else
                  out_path(f"cache-{nodes}" if args.nodes else "cache"))


if __name__ == "__main__":
    raise SystemExit(main())
