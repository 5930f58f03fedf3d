"""Typed configs: every shipped YAML loads; bad keys, types and overrides fail by name."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gnntrain.config import (
    ConfigError,
    CsvDataset,
    NpzDataset,
    PlanetoidDataset,
    RunConfig,
    SyntheticConfig,
    SyntheticDataset,
    load_config,
    parse_dataset,
)
from gnntrain.data import load_dataset

DATASETS = Path(__file__).resolve().parent.parent / "datasets"
CONFIGS = sorted(DATASETS.glob("*.yaml"))
REQUIRED = {"cora", "citeseer", "synthetic-tiny", "synthetic-small", "synthetic-1m",
            "tolokers", "ogbn-arxiv", "ogbn-products", "ogbn-papers100M"}
SECTIONS = {"dataset", "partition", "sampler", "model", "train", "cluster"}


def _raw(name: str = "synthetic-tiny") -> dict[str, Any]:
    return dict(yaml.safe_load((DATASETS / f"{name}.yaml").read_text()))


def test_every_required_config_is_shipped() -> None:
    assert REQUIRED <= {p.stem for p in CONFIGS}


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_loads_with_all_sections(path: Path) -> None:
    raw = yaml.safe_load(path.read_text())
    assert SECTIONS <= set(raw), f"{path.name} lacks {SECTIONS - set(raw)}"
    cfg = load_config(path)
    assert cfg.dataset.name == path.stem
    assert cfg.model.layers == len(cfg.sampler.fanouts)
    assert cfg.partition.parts == cfg.cluster.workers


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_dumped_config_loads_back_equal(path: Path) -> None:
    """A run directory stores the resolved config with every default spelled out."""
    cfg = load_config(path)
    assert load_config(raw=cfg.model_dump(mode="json")) == cfg


def test_tiny_config_builds_its_graph() -> None:
    g = load_dataset(load_config(DATASETS / "synthetic-tiny.yaml").dataset)
    assert 4000 <= g.num_nodes <= 6000


@pytest.mark.parametrize("name", ["cora", "citeseer", "tolokers", "email-eu-core"])
def test_real_configs_point_at_real_files(name: str, data_root: Path) -> None:
    g = load_dataset(load_config(DATASETS / f"{name}.yaml").dataset)
    assert g.train_idx.size > 0
    if name == "email-eu-core":  # SOURCES: 1,005 nodes, 16,064 undirected pairs, 42 classes
        assert (g.num_nodes, g.num_classes) == (1005, 42)


def test_unknown_key_names_its_path() -> None:
    raw = _raw()
    raw["train"]["epoch"] = 3
    with pytest.raises(ConfigError, match=r"train\.epoch: unknown key \(value 3\)"):
        load_config(raw=raw)


def test_unknown_nested_key_in_synthetic() -> None:
    raw = _raw()
    raw["dataset"]["synthetic"]["node"] = 10
    with pytest.raises(ConfigError, match=r"dataset\.synthetic\.node: unknown key"):
        load_config(raw=raw)


def test_wrong_type_names_field_and_value() -> None:
    raw = _raw()
    raw["train"]["epochs"] = "three"
    with pytest.raises(ConfigError, match=r"train\.epochs: .*integer.*\(got 'three'\)"):
        load_config(raw=raw)


def test_set_on_missing_key_lists_known_keys() -> None:
    with pytest.raises(ConfigError, match=r"--set train\.epoch: no such key 'train\.epoch'; "
                                          r"known keys here: .*epochs"):
        load_config(DATASETS / "synthetic-tiny.yaml", overrides=["train.epoch=3"])
    with pytest.raises(ConfigError, match=r"no such key 'dataset\.synthetic\.size'"):
        load_config(DATASETS / "synthetic-tiny.yaml", overrides=["dataset.synthetic.size=3"])


def test_set_overrides_value_and_is_validated() -> None:
    cfg = load_config(DATASETS / "synthetic-tiny.yaml",
                      overrides=["train.epochs=3", "dataset.synthetic.nodes=777"])
    assert cfg.train.epochs == 3 and cfg.dataset.synthetic.nodes == 777
    with pytest.raises(ConfigError, match=r"train\.epochs: .*greater than or equal to 1"):
        load_config(DATASETS / "synthetic-tiny.yaml", overrides=["train.epochs=0"])
    with pytest.raises(ConfigError, match=r"expected KEY=VALUE"):
        load_config(DATASETS / "synthetic-tiny.yaml", overrides=["train.epochs"])


def test_load_config_does_not_mutate_the_callers_dict() -> None:
    raw = _raw()
    before = copy.deepcopy(raw)
    load_config(raw=raw, overrides=["train.epochs=2"])
    assert raw == before


def test_with_overrides_equals_load_config_of_the_same_overrides() -> None:
    items = ["train.epochs=3", "dataset.synthetic.nodes=777", "cluster.workers=3", "partition.parts=3",
             "model.options.aggr=mean", "dataset.source=csv", "dataset.edges=e.csv"]
    cfg = load_config(DATASETS / "synthetic-tiny.yaml")
    before = cfg.model_dump()
    derived = cfg.with_overrides(items)
    assert derived == load_config(DATASETS / "synthetic-tiny.yaml", overrides=items)
    assert derived.train.epochs == 3 and isinstance(derived.dataset, CsvDataset)
    assert cfg.model_dump() == before and cfg.train.epochs != 3  # the original is unchanged
    assert cfg.with_overrides([]) == cfg


def test_with_overrides_fails_as_load_config_does() -> None:
    cfg = load_config(DATASETS / "synthetic-tiny.yaml")
    for bad, msg in [("train.epochs=0", r"train\.epochs: .*greater than or equal to 1 \(got 0\)"),
                     ("train.epoch=3", r"--set train\.epoch: no such key 'train\.epoch'; known keys here: .*epochs"),
                     ("model.layers=3", r"model\.layers=3 but sampler\.fanouts has 2 entries")]:
        with pytest.raises(ConfigError, match=msg) as derived:
            cfg.with_overrides([bad])
        with pytest.raises(ConfigError) as loaded:
            load_config(raw=cfg.model_dump(mode="json"), overrides=[bad])
        assert str(derived.value) == str(loaded.value)
    with pytest.raises(TypeError, match=r"overrides='train\.epochs=3': give a list"):
        cfg.with_overrides("train.epochs=3")


def test_configs_are_frozen() -> None:
    cfg = load_config(DATASETS / "synthetic-tiny.yaml")
    with pytest.raises(ValueError, match="frozen"):
        cfg.train.epochs = 5  # type: ignore[misc]


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml does not exist; dataset configs live in "
                                          r"datasets/\*\.yaml"):
        load_config(DATASETS / "nope.yaml")


def test_layers_must_match_fanouts() -> None:
    with pytest.raises(ConfigError, match=r"model\.layers=3 but sampler\.fanouts has 2 entries"):
        load_config(DATASETS / "synthetic-tiny.yaml", overrides=["model.layers=3"])


@pytest.mark.parametrize("kw,msg", [
    ({"source": "csv"}, r"dataset: source='csv' needs 'path' \(or 'edges'\)"),
    ({"source": "npz"}, r"dataset\.path: required for source='npz', but missing"),
    ({"source": "hdf5", "path": "a"}, r"dataset\.source: got 'hdf5'; expected one of planetoid, "
                                      r"npz, heterophilous, ogb, csv, ogbl, lightgcn, parquet, synthetic"),
    ({"source": "parquet", "edges": {"path": "e", "src": "a"}, "nodes": {"path": "n", "masks": ["m"]}},
     r"dataset\.nodes\.masks: masks=\['m'\]: give three different columns, the train, val and test"),
    ({}, r"dataset\.source: missing; expected one of planetoid"),
    ({"source": "npz", "path": "a.npz", "train_frac": 0.7, "val_frac": 0.4},
     r"train_frac=0\.7 \+ val_frac=0\.4 = 1\.1 > 1"),
    ({"source": "synthetic", "train_frac": 0.5},
     r"dataset\.train_frac: not a setting of dataset\.source='synthetic' \(value 0\.5\)"),
    ({"source": "synthetic", "undirected": False},
     r"dataset\.undirected: not a setting of dataset\.source='synthetic'"),
    ({"source": "synthetic", "normalize_features": "row"},
     r"dataset\.normalize_features: not a setting of dataset\.source='synthetic'"),
    ({"source": "npz", "path": "a.npz", "synthetic": {"nodes": 100}},
     r"dataset\.synthetic: not a setting of dataset\.source='npz'"),
    ({"source": "npz", "path": "a.npz", "label_column": "y"},
     r"dataset\.label_column: not a setting of dataset\.source='npz' \(value 'y'\)"),
    ({"source": "heterophilous", "path": "a.npz", "undirected": False},
     r"undirected must stay true"),
    ({"source": "npz", "path": "a.npz", "split": "time"},
     r"split='time': source='npz' takes a split index"),
    ({"source": "npz", "path": "a.npz", "split": -1}, r"split=-1: a split index must be >= 0"),
    ({"source": "csv", "edges": "e.csv", "delimiter": "::"}, r"delimiter='::': give one character"),
    ({"source": "synthetic", "synthetic": {"train_frac": 0.9, "val_frac": 0.2}},
     r"train_frac=0\.9 \+ val_frac=0\.2"),
])
def test_dataset_section_consistency(kw: dict[str, Any], msg: str) -> None:
    raw = {"dataset": {"name": "x", **kw}, "sampler": {"fanouts": [5]}, "model": {"layers": 1}}
    with pytest.raises(ConfigError, match=msg):
        load_config(raw=raw)


def test_dataset_config_defaults_are_the_documented_ones() -> None:
    d = parse_dataset({"name": "x", "source": "npz", "path": "a.npz"})
    assert isinstance(d, NpzDataset)
    assert (d.undirected, d.dedup, d.self_loops, d.split) == (True, True, "keep", 0)
    assert RunConfig(dataset=d, sampler={"fanouts": [5]}, model={"layers": 1}).dataset is d
    s = parse_dataset({"name": "x", "source": "synthetic"})
    assert isinstance(s, SyntheticDataset) and s.synthetic == SyntheticConfig()


def test_set_on_a_dataset_key_resolves_the_source_model() -> None:
    """``--set dataset.X`` walks the model the raw ``source`` names, not a union of all."""
    cfg = load_config(DATASETS / "cora.yaml", overrides=["dataset.planetoid_name=CiteSeer",
                                                         "dataset.split=random"])
    assert isinstance(cfg.dataset, PlanetoidDataset)
    assert (cfg.dataset.planetoid_name, cfg.dataset.split) == ("CiteSeer", "random")
    with pytest.raises(ConfigError, match=r"no such key 'dataset\.delimiter'; known keys here "
                                          r"\(for dataset\.source='planetoid'\): .*planetoid_name"):
        load_config(DATASETS / "cora.yaml", overrides=["dataset.delimiter=;"])
    switched = load_config(DATASETS / "synthetic-tiny.yaml",
                           overrides=["dataset.source=csv", "dataset.edges=e.csv",
                                      "dataset.delimiter=;"])
    assert isinstance(switched.dataset, CsvDataset) and switched.dataset.delimiter == ";"
    assert switched.dataset.name == "synthetic-tiny"  # a shared key survives the switch


def test_dumped_config_has_only_the_sources_own_keys() -> None:
    cora = load_config(DATASETS / "cora.yaml").model_dump(mode="json")["dataset"]
    assert "synthetic" not in cora and "delimiter" not in cora and cora["path"] == "planetoid"
    tiny = load_config(DATASETS / "synthetic-tiny.yaml").model_dump(mode="json")["dataset"]
    assert set(tiny) == {"name", "source", "synthetic"}


def test_parts_must_equal_workers() -> None:
    with pytest.raises(ConfigError, match=r"partition\.parts=2 but cluster\.workers=3: each worker "
                                          r"owns exactly one part"):
        load_config(DATASETS / "synthetic-tiny.yaml", overrides=["cluster.workers=3"])
    cfg = load_config(DATASETS / "synthetic-tiny.yaml",
                      overrides=["cluster.workers=3", "partition.parts=3"])
    assert cfg.partition.parts == cfg.cluster.workers == 3


def test_run_cli_resolves_workers_into_both_and_single_process_defaults() -> None:
    from gnntrain.run import parse_args, resolve_config

    cfg, _ = resolve_config(parse_args(["--config", str(DATASETS / "cora.yaml"), "--workers", "3"]))
    assert (cfg.partition.parts, cfg.cluster.workers) == (3, 3)
    cfg, _ = resolve_config(parse_args(["--single-process"]))  # the default config
    assert cfg.dataset.name == "synthetic-tiny"
    with pytest.raises(ConfigError, match=r"partition\.parts=3 but cluster\.workers=2"):
        resolve_config(parse_args(["--single-process", "--set", "partition.parts=3"]))


def test_data_root_env_then_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gnntrain.config import data_root

    monkeypatch.setenv("GNNTRAIN_DATA", str(tmp_path / "d"))
    assert data_root() == tmp_path / "d"
    monkeypatch.delenv("GNNTRAIN_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data_root() == tmp_path / "xdg" / "gnntrain" / "datasets"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_root() == tmp_path / "home" / ".cache" / "gnntrain" / "datasets"
    assert "shared" not in str(data_root())  # nothing beside the checkout


def test_missing_relative_path_names_resolved_path_and_env(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    from gnntrain.data import DataError

    ds = parse_dataset({"name": "t", "source": "npz", "path": "het/t.npz"})
    monkeypatch.delenv("GNNTRAIN_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    want = tmp_path / "xdg" / "gnntrain" / "datasets" / "het" / "t.npz"
    with pytest.raises(DataError, match=rf"dataset\.path='het/t\.npz' resolves to {want}, which does "
                                        r"not exist \(\$GNNTRAIN_DATA is unset.*set GNNTRAIN_DATA"):
        load_dataset(ds)
    monkeypatch.setenv("GNNTRAIN_DATA", str(tmp_path))
    with pytest.raises(DataError, match=rf"resolves to {tmp_path}/het/t\.npz, which does not exist "
                                        rf"\(\$GNNTRAIN_DATA={tmp_path}\)"):
        load_dataset(ds)


def test_weighted_sampling_is_refused_when_the_config_is_read() -> None:
    """No dataset source carries edge weights into a training run: refuse it up front."""
    with pytest.raises(ConfigError, match=r"sampler.weighted=true"):
        load_config(DATASETS / "cora.yaml", ["sampler.weighted=true"])


def test_model_and_task_accept_import_paths_and_free_options() -> None:
    cfg = load_config(DATASETS / "cora.yaml",
                      ["model.arch=mypkg.models:gin", "model.options.eps=0.1",
                       "task.kind=mypkg.tasks:Smooth", "task.options.alpha=0.2"])
    assert cfg.model.arch == "mypkg.models:gin" and cfg.model.options == {"eps": 0.1}
    assert cfg.task.kind == "mypkg.tasks:Smooth" and cfg.task.options == {"alpha": 0.2}
    for bad in ("model.arch=graphsage", "model.arch=pkg.mod", "task.kind=link prediction"):
        with pytest.raises(ConfigError, match="expected one of"):
            load_config(DATASETS / "cora.yaml", [bad])


def test_the_config_accepts_exactly_the_registered_builtins() -> None:
    """One registry per plug-in kind: the names the config takes are the models and tasks
    that resolve (gnntrain.config.plugins lists each once)."""
    from gnntrain.models import BUILTIN as MODELS
    from gnntrain.tasks import BUILTIN as TASKS

    for arch in MODELS:
        assert load_config(DATASETS / "cora.yaml", [f"model.arch={arch}"]).model.arch == arch
    for kind in TASKS:
        assert load_config(DATASETS / "cora.yaml", [f"task.kind={kind}"]).task.kind == kind
    with pytest.raises(ConfigError, match=rf"expected one of {re.escape(str(list(MODELS)))}"):
        load_config(DATASETS / "cora.yaml", ["model.arch=graphsage"])
    with pytest.raises(ConfigError, match=rf"expected one of {re.escape(str(list(TASKS)))}"):
        load_config(DATASETS / "cora.yaml", ["task.kind=node"])


def test_a_dataset_without_features_needs_a_node_embedding() -> None:
    """A graph with 0 feature columns (HeCo AMiner and Freebase: no type has features)
    would feed the model zeros, and its loss would stay at ln(classes): refused before
    any work, naming the field; with a node embedding the input is the table's rows."""
    cfg = load_config(DATASETS / "aminer.yaml")
    assert cfg.model.input_dim(0) == 64
    bare = cfg.with_overrides(["model.node_embedding=null"])
    with pytest.raises(ValueError, match=r"model.node_embedding=null: the dataset has no node features"):
        bare.model.input_dim(0)
    assert bare.model.input_dim(7) == 7


def test_eval_every_auto_evaluates_every_epoch_unless_the_graph_is_large() -> None:
    from gnntrain.config.run import LARGE_GRAPH_EVAL_EVERY, LARGE_GRAPH_NODES

    cfg = load_config(DATASETS / "synthetic-tiny.yaml", overrides=["train.eval_every=auto"])
    assert cfg.train.eval_every == "auto"
    assert cfg.with_eval_every_for(LARGE_GRAPH_NODES).train.eval_every == 1
    assert cfg.with_eval_every_for(LARGE_GRAPH_NODES + 1).train.eval_every == LARGE_GRAPH_EVAL_EVERY == 5
    set_to_3 = cfg.with_overrides(["train.eval_every=3"])
    assert set_to_3.with_eval_every_for(10**9).train.eval_every == 3  # a number is kept
    with pytest.raises(ValueError, match="resolved by the run"):
        cfg.train.eval_interval()
    with pytest.raises(ConfigError, match="eval_every=0: must be an integer >= 1 or 'auto'"):
        cfg.with_overrides(["train.eval_every=0"])
    with pytest.raises(ConfigError, match="train.eval_every"):
        cfg.with_overrides(["train.eval_every=sometimes"])


def test_auto_evaluation_interval_follows_the_graphs_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default (auto) evaluates every epoch of a small graph and every 5th epoch (and
    the last) of one above LARGE_GRAPH_NODES, here lowered to 50 nodes."""
    import json

    from gnntrain.runtime.coordinator import run_training
    from tests.conftest import make_graph
    from tests.runtime.helpers import tiny_cfg

    def evaluated(root: Path) -> list[int]:
        cfg = tiny_cfg(root, "train.epochs=6")
        assert cfg.train.eval_every == "auto"  # the default
        s = run_training(cfg, graph=make_graph(100), single_process=True, progress=False)
        return [r["epoch"] for r in map(json.loads, (Path(s["run_dir"]) / "metrics.jsonl").open())
                if "val_acc" in r]

    assert evaluated(tmp_path / "small") == [0, 1, 2, 3, 4, 5]
    monkeypatch.setattr("gnntrain.config.run.LARGE_GRAPH_NODES", 50)
    assert evaluated(tmp_path / "large") == [4, 5]
