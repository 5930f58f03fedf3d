"""The run config: every section besides ``dataset`` (model, task, train, cluster,
faults; ``partition`` and ``sampler`` come from their packages), the :class:`RunConfig` that
holds them and checks them against each other, and :func:`load_config`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import Field, field_validator, model_validator

from gnntrain.config.base import ConfigError, Frozen
from gnntrain.config.datasets import DatasetConfig
from gnntrain.config.loading import read_yaml, validate
from gnntrain.config.plugins import MODEL_ARCHS, TASK_KINDS, check_name
from partition.config import PartitionConfig
from partition.storage import redact
from samplers.config import SamplerConfig

__all__ = [
    "BUILTIN_ARCHS", "BUILTIN_TASKS", "EMBEDDING_OPTIMIZERS", "ClusterConfig", "FaultConfig",
    "FeatureDtype", "ModelConfig", "NodeEmbeddingConfig", "RunConfig", "ScheduledFault", "TaskConfig",
    "TrainConfig", "load_config", "parse_address",
]


BUILTIN_ARCHS = tuple(MODEL_ARCHS)
"""``model.arch`` names of the built-in models (the registry's, :mod:`gnntrain.config.plugins`)."""


EMBEDDING_OPTIMIZERS = ("sparse_adam", "sparse_adagrad", "sgd")


class NodeEmbeddingConfig(Frozen):
    """A learnable input row per node, partitioned like the features (``model.node_embedding``).

    Each worker owns the rows of its part (:mod:`gnntrain.embedding`); a batch reads its
    input rows from their owners, and the rows it touched are updated sparsely by the
    owner with ``optimizer`` after every step. ``combine`` says how the rows meet the
    dataset's features: ``concat`` (model input width features + dim), ``sum`` (dim must
    equal the feature width) or ``only`` (the features are ignored).
    """

    dim: int = Field(ge=1, description="width of each node's learnable row")
    init: Literal["normal", "uniform"] = Field(
        "normal", description="normal: N(0, init_scale^2); uniform: U(-init_scale, init_scale); "
        "a row depends only on (train.seed, the node's original id), so any partitioning "
        "starts from the same table")
    init_scale: float = Field(1.0, gt=0)
    optimizer: Literal["sparse_adam", "sparse_adagrad", "sgd"] = Field(
        "sparse_adam", description="row-wise update of the rows a step touched")
    lr: float = Field(0.01, gt=0)
    combine: Literal["concat", "sum", "only"] = "concat"
    mmap_above_mb: float | None = Field(
        None, ge=0, description="a part's table (plus optimizer state) larger than this many "
        "MiB is kept in memory-mapped scratch files, which the OS can page out when the table "
        "outgrows memory (sparse steps were 6x slower in bench.embedding); None = never, 0 = always")

    @field_validator("dim", mode="before")
    @classmethod
    def _positive_dim(cls, v: Any) -> Any:
        if isinstance(v, int) and v <= 0:
            raise ValueError(f"dim={v}: the embedding width must be a positive integer")
        return v

    @field_validator("optimizer", mode="before")
    @classmethod
    def _known_optimizer(cls, v: Any) -> Any:
        if v not in EMBEDDING_OPTIMIZERS:
            raise ValueError(f"optimizer={v!r}: a partitioned embedding table is updated with "
                             f"one of {list(EMBEDDING_OPTIMIZERS)} (row-wise, sparse)")
        return v


class ModelConfig(Frozen):
    """The model: a built-in ``arch`` or a user factory ``package.module:factory`` called
    as ``factory(in_dim, out_dim, model_config)`` (:mod:`gnntrain.models.protocol`).
    ``node_embedding`` adds a learnable row per node to the input (``in_dim`` then counts
    it, see :meth:`input_dim`)."""

    arch: str = Field("sage", description="sage | gcn | gat | rgcn (typed graphs; options "
                      "node_types, relations, bases, root_per_type) | hsage (typed; options node_types, "
                      "relation_dst) | package.module:factory")
    hidden: int = Field(256, ge=1)
    layers: int = Field(3, ge=1)
    dropout: float = Field(0.5, ge=0.0, lt=1.0)
    norm: Literal["none", "batch", "layer"] = "none"
    heads: int = Field(4, ge=1, description="attention heads (gat only)")
    options: dict[str, Any] = Field(default_factory=dict, description="free-form settings for a "
                                    "user factory (it type-checks them); built-ins take none")
    node_embedding: NodeEmbeddingConfig | None = Field(
        None, description="a learnable, partitioned input row per node (none by default)")

    @field_validator("arch")
    @classmethod
    def _arch(cls, v: str) -> str:
        return check_name(v, MODEL_ARCHS, "arch")

    def input_dim(self, num_features: int) -> int:
        """The model's input width for a dataset with ``num_features`` features."""
        e = self.node_embedding
        if e is None:
            if num_features == 0:
                raise ValueError("model.node_embedding=null: the dataset has no node features (0 "
                                 "columns on every node type), so the model would read only zeros "
                                 "and stay at chance; set model.node_embedding (e.g. {dim: 64, "
                                 "combine: only}) to learn a row per node")
            return num_features
        if e.combine == "concat":
            return num_features + e.dim
        if e.combine == "sum" and e.dim != num_features:
            raise ValueError(f"model.node_embedding.dim={e.dim} with combine='sum' must equal the "
                             f"dataset's feature width {num_features}; use combine='concat' or 'only'")
        return e.dim


BUILTIN_TASKS = tuple(TASK_KINDS)
"""``task.kind`` names of the built-in tasks (the registry's)."""


class TaskConfig(Frozen):
    """The learning problem (:mod:`gnntrain.tasks`): a built-in ``kind`` or a user task
    ``package.module:factory``, made with ``options`` as keyword arguments."""

    kind: str = Field("node_classification",
                      description="node_classification | link | package.module:factory")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the "
                                    "task, e.g. {label_smoothing: 0.1}")

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        return check_name(v, TASK_KINDS, "kind")


FeatureDtype = Literal["float32", "float16", "bfloat16", "int8"]

LARGE_GRAPH_NODES = 1_000_000
"""``train.eval_every: auto`` evaluates every epoch up to this many nodes, every
:data:`LARGE_GRAPH_EVAL_EVERY` epochs above."""
LARGE_GRAPH_EVAL_EVERY = 5


class TrainConfig(Frozen):
    epochs: int = Field(10, ge=1)
    lr: float = Field(0.003, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    seed: int = 0
    eval_every: int | Literal["auto"] = Field(
        "auto", description="epochs between evaluations (the last epoch is always evaluated). "
        "auto: every epoch on a graph of up to 1,000,000 nodes, every 5th epoch on a larger one "
        "(an evaluation computes every node's rows, which on a large graph with few labelled nodes "
        "costs more than an epoch of training; DistDGL's examples evaluate every 5th); "
        "metrics.jsonl shows which epochs were evaluated")
    eval: Literal["full", "sampled"] = "full"
    eval_max_nodes: int | None = Field(
        200_000, ge=1, description="sampled evaluation scores at most about this many nodes "
        "per split: a larger split is evaluated on a seeded sample (each node kept with "
        "probability eval_max_nodes / split size, by a hash of its id; the same nodes at every "
        "evaluation), and the metrics say how many nodes they count ({split}_nodes); null "
        "evaluates every node. Layer-wise evaluation always scores every node")
    device: Literal["cpu", "cuda"] = "cpu"
    checkpoint_every: int = Field(0, ge=0, description="epochs between checkpoints; 0 = end only")
    keep_checkpoints: int = Field(2, ge=1)
    keep_best: bool = Field(True, description="also write checkpoints/best.pt whenever the validation "
                            "metric reaches a new best; prediction and gnntrain.load use it by default")
    patience: int | None = Field(
        None, ge=1, description="early stopping: end the run once this many evaluations in a row "
        "have not improved the validation metric (the task's headline, e.g. val_acc or val_hits); "
        "the run then ends as after its last epoch (final checkpoint, report), and best.pt holds "
        "the best epoch. Counted in evaluations, so eval_every=5 with patience=3 waits 15 epochs. "
        "None: train every epoch")
    max_failures: int = Field(0, ge=0)
    feature_dtype: FeatureDtype | dict[str, FeatureDtype] = Field(
        "float32", description="dtype feature rows travel in between workers (float32 exact; "
        "float16/bfloat16 2 bytes a value; int8 1 byte plus a float32 scale per row). On a typed "
        "graph a mapping gives each node type its own ({paper: int8, author: float16}); types "
        "it does not name travel float32 (gnntrain/runtime/codec.py)")
    sparse_feature_transfer: bool = Field(
        True, description="an owner sends a feature reply, and a layer-wise evaluation's "
        "hidden-row reply, as CSR (nonzero values at the reply's width, their columns and row "
        "offsets) when that takes at most half the dense bytes: exact, decided per reply from "
        "the rows' own zeros (gnntrain/runtime/codec.py); false: always dense")
    precision: Literal["fp32", "bf16"] = Field(
        "fp32", description="the model's compute: fp32, or bf16 = forward under torch.autocast "
        "in bfloat16 (float16 + a gradient scaler on GPUs without bfloat16); parameters, "
        "gradients, their all-reduce and the optimizer state stay float32 (gnntrain/precision.py)")
    optimizer: Literal["adam", "sgd"] = "adam"
    grad_clip_norm: float | None = Field(
        None, gt=0, description="scale the model's summed gradients down to at most this total "
        "2-norm before each optimizer step (torch.nn.utils.clip_grad_norm_); None: no clipping. "
        "A model.node_embedding table's sparse rows are not clipped")
    run_root: str = Field(
        "runs", description="where each run writes its run directory (<run_root>/<name>-<stamp>): a "
        "directory, or an object-store URI (s3://bucket/prefix, gs://bucket/prefix): then the "
        "coordinator writes the run directory to a staging directory under cluster.scratch_dir and "
        "mirrors it to the store (each checkpoint's files first and its manifest last; metrics, "
        "comm, summary, config and plots at every epoch end and at the run's end)")
    plots: bool = Field(
        True, description="draw accuracy.png, bytes.png, heatmap.png and partition.png into the run "
        "directory at the run's end (about 1-2 s of CPU a run with matplotlib). Off (sweeps of many "
        "trials, test suites), the run directory still holds every figure's data: `python -m "
        "gnntrain.report RUN_DIR` draws the same images later")
    storage_options: dict[str, Any] = Field(
        default_factory=dict, description="options of the object store of a URI run_root, handed "
        "to fsspec as they are (e.g. endpoint_url of an on-premise S3, anon, profile): the store of "
        "the run directories has its own options, as partition.root has partition.storage_options. "
        "Secret-looking keys are never written to config.yaml, summary.json, checkpoints or logs")

    @field_validator("eval_every")
    @classmethod
    def _eval_every(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError(f"eval_every={v}: must be an integer >= 1 or 'auto'")
        return v

    def eval_interval(self) -> int:
        """``eval_every`` as a number of epochs (a run resolves ``auto`` from its graph's
        size before it trains: :meth:`RunConfig.with_eval_every_for`)."""
        if not isinstance(self.eval_every, int):
            raise ValueError("train.eval_every=auto is resolved by the run from the graph's size "
                             "(RunConfig.with_eval_every_for) before training")
        return self.eval_every


class ClusterConfig(Frozen):
    workers: int = Field(1, ge=1)
    address: str | None = Field(None, description="Ray address; None starts Ray embedded")
    num_cpus: float | None = Field(None, gt=0, description="CPUs for the embedded instance")
    cpus_per_worker: float | None = Field(None, gt=0, description="CPUs Ray reserves for each worker; "
                                          "its torch threads are the whole ones (at least 1); None: "
                                          "an equal share of the cluster's, at most 1")
    gpus_per_worker: float | None = Field(None, gt=0, le=1, description="fraction of a GPU per worker "
                                          "with train.device=cuda; default: the GPUs shared evenly")
    call_timeout_s: float = Field(120.0, gt=0, description="per-message limit of a peer's "
                                  "sampling, feature or hidden-row request")
    collective_timeout_s: float = Field(120.0, gt=0, description="limit of one all-reduce")
    stall_timeout_s: float = Field(
        300.0, gt=0, description="a worker busy with a coordinator call (start-up, training, "
        "evaluation, prediction, checkpoint) fails only when it has made no progress for this "
        "long: no step, batch or layer counted and no CPU time used by its training thread, "
        "while none of the other busy workers made progress either. Long phases that make "
        "progress are never cut off")
    epoch_timeout_s: float | None = Field(None, gt=0, description="optional hard limit on one "
                                          "training epoch's wall time; off by default")
    connect_timeout_s: float = Field(20.0, gt=0)
    scratch_dir: str | None = Field(None, description="node-local directory where each worker "
                                    "stages its own part of a partition set on object storage "
                                    "(partition.root=s3://...), reused by the next run on the node; "
                                    "None: gnntrain-scratch under the node's temp directory")
    scratch_max_gb: float | None = Field(None, gt=0, description="most GB kept under scratch_dir on a "
                                         "node: staged partition sets and the local copies of runs on "
                                         "object storage (runs/, sweeps/, cache/). Before a worker stages "
                                         "a set or a run stages its directory, the least recently used "
                                         "other entries are removed until it fits (never one a live "
                                         "process holds or one used in the last minute); None: keep "
                                         "everything")
    on_worker_loss: Literal["restart", "shrink"] = Field(
        "restart", description="when a failed worker's node has left the cluster and no new node "
        "joins within replace_timeout_s: 'restart' ends the run naming the worker and the node, "
        "'shrink' places that worker's rank on a surviving node (which then runs two ranks) and "
        "goes on from the last checkpoint with the same ranks, parts, batches and streams")
    replace_timeout_s: float = Field(60.0, gt=0, description="how long a worker whose node left "
                                     "the cluster waits for a new node before on_worker_loss applies")
    keep_survivors: bool = Field(True, description="when a worker fails and every node of its "
                                 "group is still in the cluster, the recovery keeps the other "
                                 "workers (each that leaves the failed call within 10 s) and starts a "
                                 "new actor for the failed rank only; false: every rank starts anew")

    @model_validator(mode="after")
    def _address_form(self) -> ClusterConfig:
        if self.address is not None:
            parse_address(self.address)
        return self

    @property
    def scratch_max_bytes(self) -> int | None:
        """``scratch_max_gb`` in bytes (None: no limit)."""
        return None if self.scratch_max_gb is None else int(self.scratch_max_gb * 1e9)


def parse_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a Ray address, None for ``auto`` / ``local``; a malformed one
    raises ValueError naming the forms allowed."""
    if address in ("auto", "local"):
        return None
    url = urlparse(address if "://" in address else f"ray://{address}")
    try:
        host, port = url.hostname, url.port
    except ValueError:  # a port that is not a number or out of range
        host, port = None, None
    if url.scheme not in ("ray", "") or not host or not port or url.path not in ("", "/"):
        raise ValueError(f"cluster.address={address!r}: expected 'auto', 'local', 'HOST:PORT' or "
                         "'ray://HOST:PORT' (port 1-65535)")
    return host, port


class _FaultPoint(Frozen):
    """Where an injected fault strikes: worker ``rank`` at (``epoch``, ``step``)."""

    rank: int = Field(0, ge=0)
    epoch: int = Field(0, ge=0)
    step: int = Field(0, ge=0)


class ScheduledFault(_FaultPoint):
    """One entry of ``faults.schedule``: a fault that stops the run (``raise``, ``exit``
    or ``stall``) at one point, on one attempt of the run."""

    kind: Literal["raise", "exit", "stall"]


class FaultConfig(_FaultPoint):
    """Fault injection for tests and drills: worker ``rank`` fails at (``epoch``, ``step``).

    ``raise`` raises in the training step, ``exit`` kills the worker process, ``stall``
    stops answering (sleeps) so that timeouts and the stall detection are exercised. Two
    kinds are slow but never stalled, and must not be failed: ``slow`` sleeps ``seconds``
    after every step from (``epoch``, ``step``) on, ``busy`` computes for ``seconds`` once
    at (``epoch``, ``step``) without advancing its step. Off by default.

    ``schedule`` injects several faults in order instead of one (with ``kind: none``):
    entry i fires only on attempt i of the run, the attempt after i recoveries, so n
    entries are n failures, one per attempt. A recovery restarts from the last
    epoch-boundary checkpoint, so every entry lies in a later epoch than the one before.
    """

    kind: Literal["none", "raise", "exit", "stall", "slow", "busy"] = "none"
    times: int = Field(1, ge=1, description="how many attempts of the run the fault hits")
    seconds: float = Field(1.0, gt=0, description="the delay of kind slow / busy")
    schedule: list[ScheduledFault] = Field(
        default_factory=list, description="faults injected one per attempt: entry i on the "
        "attempt after i recoveries, at its (epoch, step) on its rank; epochs strictly "
        "increasing; only with kind none")

    @model_validator(mode="after")
    def _one_way_to_inject(self) -> FaultConfig:
        if self.schedule and self.kind != "none":
            raise ValueError(f"faults.kind={self.kind!r} together with faults.schedule "
                             f"({len(self.schedule)} entries): use one or the other (kind none "
                             "with a schedule)")
        for i, (a, b) in enumerate(zip(self.schedule, self.schedule[1:], strict=False)):
            if b.epoch <= a.epoch:
                raise ValueError(
                    f"faults.schedule[{i + 1}].epoch={b.epoch} after faults.schedule[{i}].epoch="
                    f"{a.epoch}: epochs must strictly increase (a recovery goes back to the last "
                    "epoch-boundary checkpoint, so the next fault must lie in a later epoch)")
        return self

    def points(self) -> list[tuple[str, _FaultPoint]]:
        """(config path, fault) of every fault this section injects."""
        single = [] if self.kind == "none" else [("faults", self)]
        return single + [(f"faults.schedule[{i}]", f) for i, f in enumerate(self.schedule)]

    def on_attempt(self, attempt: int) -> FaultConfig:
        """The single fault attempt ``attempt`` of the run injects: this section itself
        without a schedule; with one, its entry ``attempt`` (fired on that attempt only),
        or no fault once the schedule is spent."""
        if not self.schedule:
            return self
        if attempt >= len(self.schedule):
            return FaultConfig()
        e = self.schedule[attempt]
        # `times` counts attempts from the first: attempt i is the last one it hits
        return FaultConfig(kind=e.kind, rank=e.rank, epoch=e.epoch, step=e.step, times=attempt + 1)


class RunConfig(Frozen):
    dataset: DatasetConfig
    partition: PartitionConfig = Field(default_factory=PartitionConfig)
    sampler: SamplerConfig = Field(default_factory=SamplerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    faults: FaultConfig = Field(default_factory=FaultConfig)

    @model_validator(mode="after")
    def _layers_match(self) -> RunConfig:
        if self.model.layers != len(self.sampler.fanouts):
            raise ValueError(
                f"model.layers={self.model.layers} but sampler.fanouts has "
                f"{len(self.sampler.fanouts)} entries {self.sampler.fanouts}: give one fanout per layer")
        if self.sampler.weighted:
            raise ValueError("sampler.weighted=true: training runs carry no edge weights (no "
                             "dataset source provides them); use uniform sampling "
                             "(sampler.weighted=false)")
        return self

    @model_validator(mode="after")
    def _one_part_per_worker(self) -> RunConfig:
        if self.partition.parts != self.cluster.workers:
            raise ValueError(
                f"partition.parts={self.partition.parts} but cluster.workers={self.cluster.workers}: "
                "each worker owns exactly one part; set both (or use --workers K)")
        return self

    @model_validator(mode="after")
    def _faults_fit_the_run(self) -> RunConfig:
        workers = self.cluster.workers
        for where, f in self.faults.points():
            if f.rank >= workers:
                raise ValueError(f"{where}.rank={f.rank} but cluster.workers={workers}: a fault "
                                 f"must strike a worker that exists (rank 0..{workers - 1})")
        if len(self.faults.schedule) > self.train.max_failures:
            raise ValueError(
                f"train.max_failures={self.train.max_failures} but faults.schedule has "
                f"{len(self.faults.schedule)} entries: each entry is one failure the run must "
                f"recover from; set train.max_failures >= {len(self.faults.schedule)}")
        return self

    def with_overrides(self, overrides: Sequence[str]) -> RunConfig:
        """A new config: this one with ``KEY=VALUE`` overrides applied (``--set``'s items),
        validated as :func:`load_config` validates them, with the same errors; this one is
        left as it is. A mapping of overrides becomes items with ``gnntrain.api.override_items``."""
        if isinstance(overrides, str):  # a str is a Sequence[str] of one-letter "items"
            raise TypeError(f"overrides={overrides!r}: give a list of KEY=VALUE items, "
                            f"e.g. [{overrides!r}]")
        return load_config(raw=self.model_dump(mode="json"), overrides=list(overrides))

    def with_eval_every_for(self, num_nodes: int) -> RunConfig:
        """This config with ``train.eval_every: auto`` resolved for a graph of ``num_nodes``
        nodes: 1 up to :data:`LARGE_GRAPH_NODES`, :data:`LARGE_GRAPH_EVAL_EVERY` above; a
        number is kept."""
        if isinstance(self.train.eval_every, int):
            return self
        every = 1 if num_nodes <= LARGE_GRAPH_NODES else LARGE_GRAPH_EVAL_EVERY
        return self.model_copy(update={"train": self.train.model_copy(update={"eval_every": every})})

    def public_dump(self) -> dict[str, Any]:
        """The config as a run writes it (``config.yaml``, ``summary.json``): JSON values,
        with the secret-looking keys of ``partition.storage_options``,
        ``train.storage_options`` and ``dataset.storage_options`` (a Parquet source's store)
        left out (:func:`partition.storage.redact`), so a resumed run takes its credentials
        from the standard places again."""
        raw = self.model_dump(mode="json")
        for section in ("partition", "train", "dataset"):
            if "storage_options" in raw[section]:
                raw[section]["storage_options"] = redact(raw[section]["storage_options"])
        return raw




def load_config(path: str | os.PathLike[str] | None = None, overrides: list[str] | None = None,
                *, raw: dict[str, Any] | None = None) -> RunConfig:
    """Read a YAML config (or a dict), apply ``KEY=VALUE`` overrides and validate.

    An override of ``dataset.X`` must name a key of the model that the section's
    ``source`` selects; ``dataset.source=S`` switches the model and drops the keys the
    new source does not have (the shared ones, such as ``name``, stay).
    """
    if raw is None:
        if path is None:
            raise ConfigError("load_config: give a path or raw=")
        raw = read_yaml(path)
    return validate(RunConfig, raw, overrides or [], str(path or "<dict>"))
