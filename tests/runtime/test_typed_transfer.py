"""Typed graphs move and cache feature rows per node type: each type at its own width and
transfer dtype, a cache per type, the rows read back exactly as the padded matrix holds them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from gnntrain.config import ConfigError, RunConfig
from gnntrain.data.hetero import to_training_graph
from gnntrain.report import build_summary, fmt_bytes, print_summary
from gnntrain.runtime.codec import decode, encode, type_dtypes
from gnntrain.runtime.comm import TYPED_CATEGORIES, wire_bytes
from gnntrain.runtime.coordinator import run_training
from gnntrain.runtime.driver import fit
from gnntrain.runtime.loopback import LoopbackGroup
from gnntrain.tasks import NodeClassification
from partition.graph import Graph
from partition.training_set import TrainingSet, build_training_set
from samplers.cache import TypedFeatureCache
from tests.conftest import make_graph
from tests.runtime.test_typed_training import HG, typed_cfg

# paper rows 8 wide, author rows 3 wide, institutions and fields featureless: padded to 8
_rng = np.random.default_rng(7)
HGW = dataclasses.replace(HG, x={**HG.x, "author": _rng.standard_normal((HG.num_nodes["author"], 3))
                                 .astype(np.float32)}, _hash=[])
GRAPHW = to_training_graph(HGW)


def _group(cfg: RunConfig, tmp_path: Path, graph: Graph = GRAPHW) -> tuple[LoopbackGroup, TrainingSet]:
    ts = build_training_set(graph, cfg.partition, tmp_path / "parts")
    parts = [ts.load_part(p) for p in range(ts.num_parts)]
    return LoopbackGroup(cfg, parts, ts.global_degrees(), int(ts.num_classes), cfg.model.arch,
                         NodeClassification(), node_types=ts.node_types()), ts


def test_type_dtypes_resolve_and_refuse_with_the_allowed_values() -> None:
    names = ("paper", "author", "field")
    assert type_dtypes("float16", names) == ("float16",) * 3
    assert type_dtypes("int8", ()) == ("int8",)
    assert type_dtypes({"paper": "int8", "field": "bfloat16"}, names) == ("int8", "float32", "bfloat16")
    with pytest.raises(ValueError, match=r"\['venue'\] are not node types.*'paper', 'author', 'field'"):
        type_dtypes({"venue": "int8"}, names)
    with pytest.raises(ValueError, match="needs a typed graph.*float32, float16, bfloat16, int8"):
        type_dtypes({"paper": "int8"}, ())
    with pytest.raises(ValueError, match=r"feature_dtype.paper='int4'.*float32, float16"):
        type_dtypes({"paper": "int4"}, names)


@pytest.mark.parametrize("spec", ["float32", "{paper: int8, author: float16}"])
def test_remote_rows_travel_per_type_and_read_back_as_the_padded_rows(tmp_path: Path, spec: str) -> None:
    cfg = typed_cfg(tmp_path, f"train.feature_dtype={spec}", "train.sparse_feature_transfer=false",
                    workers=2)
    group, ts = _group(cfg, tmp_path)
    w0, w1 = (w.access for w in group.workers)
    remote = np.arange(w1.start, w1.start + w1.n_owned, dtype=np.int64)
    got = w0.reader.fetch(remote)
    padded = np.asarray(GRAPHW.x[ts.orig_ids(remote)], dtype=np.float32)
    types = ts.node_types()[remote]
    dtypes = type_dtypes("float32" if spec == "float32" else {"paper": "int8", "author": "float16"},
                         GRAPHW.node_type_names)
    for t, name in enumerate(GRAPHW.node_type_names):
        sel = types == t
        assert sel.any(), name
        width = HGW.x[name].shape[1] if name in HGW.x else 0
        want = np.zeros_like(padded[sel])
        if width:
            want[:, :width] = decode(encode(padded[sel, :width], dtypes[t], sparse=False), dtypes[t])
        np.testing.assert_array_equal(got[sel].view(np.uint32), want.view(np.uint32), err_msg=name)
        assert not padded[sel, width:].any()
    # the owner counted the reply it sent: less than the padded rows would take, split by type
    comm = w1.comm.take()
    feature = comm["bytes"][1][0]
    assert feature < wire_bytes(encode(padded, dtypes[0], sparse=False))
    by_type = dict(zip(comm["type_names"], comm["type_bytes"][1], strict=True))
    assert sum(by_type.values()) == feature
    assert by_type["paper"] > by_type["author"] > 0
    group.shutdown()


def test_a_typed_owner_refuses_a_request_with_one_dtype(tmp_path: Path) -> None:
    """A typed graph's requests carry one dtype per node type; one dtype for all is a
    caller's mistake, refused by name rather than read as a per-type sequence."""
    group, _ = _group(typed_cfg(tmp_path, workers=2), tmp_path)
    w1 = group.workers[1]
    ids = np.arange(w1.access.start, w1.access.start + 3, dtype=np.int64)
    with pytest.raises(ValueError, match="one dtype 'float32' on a typed part"):
        w1.server.features(ids, "float32", requester=0)
    group.shutdown()


def test_a_dtype_mapping_is_read_from_the_config_and_a_bad_dtype_refused(tmp_path: Path) -> None:
    cfg = typed_cfg(tmp_path, "train.feature_dtype={paper: int8, author: float16}")
    assert cfg.train.feature_dtype == {"paper": "int8", "author": "float16"}
    with pytest.raises(ConfigError, match=r"(?s)train\.feature_dtype.*'bfloat16'.*int4"):
        typed_cfg(tmp_path, "train.feature_dtype={paper: int4}")


def test_a_dtype_for_a_type_the_graph_lacks_is_refused_before_work(tmp_path: Path) -> None:
    cfg = typed_cfg(tmp_path, "train.feature_dtype={venue: int8}", workers=2)
    with pytest.raises(ValueError, match="venue.*node types"):
        run_training(cfg, graph=GRAPHW, progress=False)
    untyped = typed_cfg(tmp_path, "train.feature_dtype={paper: int8}", "model.arch=sage",
                        "model.options={}", workers=2)
    with pytest.raises(ValueError, match="needs a typed graph"):
        run_training(untyped, graph=make_graph(200), progress=False)
    cache = typed_cfg(tmp_path, "sampler.cache.policy=lru", "sampler.cache.size={venue: 0.5}", workers=2)
    with pytest.raises(ValueError, match=r"sampler.cache.size: \['venue'\] are not node types"):
        run_training(cache, graph=GRAPHW, progress=False)
    assert not (tmp_path / "parts").exists() and not (tmp_path / "runs").exists()


def _fit(cfg: RunConfig, tmp_path: Path) -> tuple[Any, LoopbackGroup]:
    group, _ = _group(cfg, tmp_path)
    return fit(cfg, group, None, NodeClassification(), progress=False), group


@pytest.mark.parametrize("policy", ["presample", "lru"])
def test_a_cache_per_type_trains_exactly_as_no_cache_with_fewer_feature_bytes(
        tmp_path: Path, policy: str) -> None:
    """Two in-process workers (no dropout: threads share torch's generator)."""
    base = ["train.epochs=2", "model.dropout=0.0"]
    plain, _ = _fit(typed_cfg(tmp_path, *base, workers=2), tmp_path)
    cached, group = _fit(typed_cfg(tmp_path, *base, f"sampler.cache.policy={policy}",
                                   "sampler.cache.size=0.5", workers=2), tmp_path)
    for a, b in zip(plain.epochs, cached.epochs, strict=True):
        for key in ("loss", "val_acc", "test_acc"):
            assert a[key] == b[key], key
    assert cached.epochs[-1]["comm"]["by_category"]["feature"] < plain.epochs[-1]["comm"]["by_category"]["feature"]
    access = group.workers[0].access
    cache = access.reader.cache
    assert isinstance(cache, TypedFeatureCache)
    info = access.cache_info
    assert set(info["capacity_by_type"]) == set(GRAPHW.node_type_names)
    assert info["capacity_by_type"]["institution"] == 0  # featureless: nothing to cache
    assert info["capacity_by_type"]["paper"] > 0 and info["capacity_by_type"]["author"] > 0
    # each type's rows at its own width: papers 8 columns, authors 3
    widths = {n: c.dim for n, c in zip(GRAPHW.node_type_names, cache.caches, strict=True) if c is not None}
    assert widths == {"paper": 8, "author": 3}
    assert info["bytes"] == 4 * (8 * info["capacity_by_type"]["paper"] + 3 * info["capacity_by_type"]["author"])
    # the run summary shows the cache's rows and memory over the workers
    cfg = typed_cfg(tmp_path, workers=2)
    summary = build_summary(cfg.model_dump(mode="json"), cached.epochs, workers=2, partition=None,
                            cache=cached.cache)
    console = Console(record=True, width=200)
    print_summary(summary, console)
    rows = sum(c["capacity"] for c in cached.cache)
    assert f"{rows:,} rows in {fmt_bytes(sum(c['bytes'] for c in cached.cache))}" in console.export_text()
    group.shutdown()


def test_featureless_types_are_read_as_zeros_without_asking(tmp_path: Path) -> None:
    cfg = typed_cfg(tmp_path, workers=2)
    group, ts = _group(cfg, tmp_path)
    w0, w1 = (w.access for w in group.workers)
    remote = np.arange(w1.start, w1.start + w1.n_owned, dtype=np.int64)
    types = ts.node_types()[remote]
    featureless = np.isin(types, [GRAPHW.node_type_names.index(n) for n in ("institution", "field_of_study")])
    assert featureless.any() and (~featureless).any()
    got = w0.reader.read(remote)
    np.testing.assert_array_equal(got, np.asarray(GRAPHW.x[ts.orig_ids(remote)]))
    assert w0.reader.stats.featureless == int(featureless.sum())
    assert w0.reader.stats.fetched == int((~featureless).sum())
    snap = w1.comm.take()  # the owner was asked for the featured rows only
    sent = dict(zip(snap["type_names"], snap["type_bytes"][TYPED_CATEGORIES.index("feature")], strict=True))
    assert sent["institution"] == sent["field_of_study"] == 0 and sent["paper"] > 0 and sent["author"] > 0
    group.shutdown()


def test_a_cache_size_per_type_caches_only_the_types_named(tmp_path: Path) -> None:
    cfg = typed_cfg(tmp_path, "train.epochs=1", "sampler.cache.policy=degree",
                    "sampler.cache.size={author: 1.0}", workers=2)
    res, group = _fit(cfg, tmp_path)
    for w in group.workers:
        a = w.access
        remote_authors = int(np.count_nonzero(
            a.node_types[~a.owned(np.arange(a.num_nodes))] == GRAPHW.node_type_names.index("author")))
        assert a.cache_info["capacity_by_type"] == {"paper": 0, "author": remote_authors,
                                                    "institution": 0, "field_of_study": 0}
    # every remote author row is cached: no author bytes in training, paper bytes as before
    feature = res.epochs[0]["comm"]["by_node_type"]["feature"]
    assert feature["author"] == 0 and feature["paper"] > 0
    group.shutdown()
