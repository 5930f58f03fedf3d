"""The DGL peer runner: every DGL figure comes from a script (``bench/_dgl_*.py``,
``bench/_distdgl_peer.py``, or code given with ``-c``) run by the Python that
``$GNNTRAIN_DGL_PYTHON`` names, in the environment :func:`peer_environ` gives, through
:func:`start_peer`; :func:`run_peer` is the common case of a graph file and a settings
JSON in, one JSON line out. :func:`dgl_state` and :func:`write_hetero_npz` write what
the peers read: our initial parameters under DGL's names, a typed graph."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.paths import BENCH
from gnntrain.allocator import TORCH_ALLOC_ENV
from gnntrain.config import RunConfig
from partition.graph import Graph

DGL_PYTHON_ENV = "GNNTRAIN_DGL_PYTHON"


def dgl_python() -> str | None:
    """The Python that has DGL (``$GNNTRAIN_DGL_PYTHON``), None when unset."""
    return os.environ.get(DGL_PYTHON_ENV) or None


def peer_environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a peer's process (DGL's): this one's, with ``DGLBACKEND`` set and
    without the torch allocator setting that importing gnntrain puts in it
    (:data:`gnntrain.allocator.TORCH_ALLOC_ENV`, huge pages for large tensors), so a peer
    runs with torch's defaults, as its users get them; ``extra`` goes on top."""
    env = {k: v for k, v in os.environ.items() if k not in TORCH_ALLOC_ENV}
    return {**env, "DGLBACKEND": "pytorch", **(extra or {})}


def script(name: str) -> Path:
    """The path of peer script ``bench/<name>``."""
    return BENCH / name


def start_peer(python: str, args: list[str], *, timeout_s: float,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS...`` (a peer script and its arguments, or ``-c CODE ...``) in
    :func:`peer_environ` (``env`` on top), output captured as text, past ``timeout_s``
    killed (``subprocess.TimeoutExpired``)."""
    return subprocess.run([python, *args], capture_output=True, text=True, timeout=timeout_s,
                          env=peer_environ(env))


def last_json(stdout: str) -> dict[str, Any]:
    """The JSON object a peer printed as its last output line."""
    return dict(json.loads(stdout.strip().splitlines()[-1]))


def run_peer(python: str, name: str, graph_file: Path, settings: dict[str, Any],
             env: dict[str, str] | None = None, *, timeout_s: float = 3600) -> dict[str, Any]:
    """Run ``bench/<name> graph_file settings`` under a peer's Python (DGL's) and return
    the JSON of its last output line; the graph file is removed afterwards. Raises
    RuntimeError with the end of its stderr when it fails."""
    try:
        proc = start_peer(python, [str(script(name)), str(graph_file), json.dumps(settings)],
                          timeout_s=timeout_s, env=env)
    finally:
        graph_file.unlink(missing_ok=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"DGL run failed (rc={proc.returncode}): {tail}")
    return last_json(proc.stdout)


def dgl_state(cfg: RunConfig, graph: Graph) -> dict[str, np.ndarray]:
    """Our initial parameters under DGL SAGEConv names (PyG lin_l -> fc_neigh + the bias,
    lin_r -> fc_self): the DGL loop starts from the same point."""
    from gnntrain.models import build_model

    sd = build_model(cfg.model.arch, cfg.model, graph.num_features, graph.num_classes, cfg.train.seed).state_dict()
    out = {}
    for i in range(cfg.model.layers):
        out[f"layers.{i}.fc_neigh.weight"] = sd[f"convs.{i}.lin_l.weight"].numpy()
        out[f"layers.{i}.fc_self.bias"] = sd[f"convs.{i}.lin_l.bias"].numpy()
        out[f"layers.{i}.fc_self.weight"] = sd[f"convs.{i}.lin_r.weight"].numpy()
    return out


def write_hetero_npz(path: Any, graph: Any, fanouts: list[int], seeds: Any = None) -> None:
    """The typed graph (a ``partition.hetero_graph.HeteroGraph``) as the npz
    ``bench/_dgl_hetero.py`` reads; ``seeds`` (default: the training ids in order) are what
    its ``sample`` draws batches from."""
    arrays: dict[str, Any] = {"x": graph.x.get(graph.target, np.zeros((graph.num_nodes[graph.target], 0),
                                                                       np.float32)),
                              "train": graph.train_idx if seeds is None else seeds,
                              "meta": json.dumps({"relations": [list(et) for et in graph.relations],
                                                  "num_nodes": graph.num_nodes, "target": graph.target,
                                                  "fanouts": fanouts})}
    for i, csr in enumerate(graph.relations.values()):
        arrays[f"src{i}"], arrays[f"dst{i}"] = csr.edges()
    np.savez(path, **arrays)
