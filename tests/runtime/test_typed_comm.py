"""Per-node-type byte accounting on a typed graph: counted bytes still equal what Ray
serialises, and the per-type parts add up to each category exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import ray

from gnntrain.runtime import ray_group
from gnntrain.runtime.comm import TYPED_CATEGORIES, CommCounter, summarise
from gnntrain.runtime.driver import fit
from gnntrain.tasks import NodeClassification
from tests.runtime.test_comm import ProbeActor, _check_counted_equals_seen, recorded_group
from tests.runtime.test_hetero_relations import per_relation
from tests.runtime.test_typed_training import GRAPH, typed_cfg


def test_split_by_type_is_proportional_and_exact() -> None:
    types = np.array([0, 0, 1, 2, 2, 2], dtype=np.int64)
    c = CommCounter(0, 2, types, ("a", "b", "c"))
    c.add("feature", 1, 1001, ids=np.array([0, 1, 2, 3, 4, 5]))  # 2:1:3 of 1001 bytes
    c.add("sample", 1, 10, ids=np.array([2]))
    c.add("eval", 1, 50)  # not a typed category: no ids needed, no split
    snap = c.take()
    assert snap["type_bytes"] == [[0, 10, 0], [334, 167, 500]]
    s = summarise([snap], 2)
    assert s["by_node_type"] == {"sample": {"a": 0, "b": 10, "c": 0},
                               "feature": {"a": 334, "b": 167, "c": 500}}
    with pytest.raises(ValueError, match="must name the ids"):
        c.add("feature", 1, 5)


@pytest.mark.parametrize("spec, dtype", [("float32", "float32"), ("{paper: float16}", "float16")])
def test_typed_bytes_equal_what_ray_serialises_and_add_up_by_type(
        ray_local: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, dtype: str) -> None:
    """Typed replies (one group per node type, a dtype per type) counted as Ray sends them;
    only papers have features, so every value that travels is a paper's, at its dtype."""
    monkeypatch.setattr(ray_group.actor, "WorkerActor", ProbeActor)
    world = 2
    cfg = typed_cfg(tmp_path, "train.epochs=1", "train.eval=full", f"train.feature_dtype={spec}",
                    "model.options={node_types: 4, relations: 8, bases: 2}", workers=world,
                    fanouts=f"[{per_relation()}, 4]")
    with recorded_group(cfg, GRAPH, world) as (group, actors, sent):
        res = fit(cfg, group, None, NodeClassification(), progress=False)
        seen = ray.get([a.probe_take.remote() for a in actors], timeout=60)
        _check_counted_equals_seen(res, seen, sent, dtype, world)
        comm = res.epochs[0]["comm"]
        for cat in TYPED_CATEGORIES:
            per = comm["by_node_type"][cat]
            assert set(per) == set(GRAPH.node_type_names)
            assert sum(per.values()) == comm["by_category"][cat] > 0, cat
            assert per["paper"] > 0, per
            if cat == "sample":
                assert per["author"] > 0, per
            else:  # featureless types are read as zeros, never asked for
                assert per["author"] == per["institution"] == per["field_of_study"] == 0, per
