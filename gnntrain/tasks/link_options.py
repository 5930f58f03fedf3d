"""The link task's options (``task.options`` of ``task.kind: link``) as one typed model.

:class:`LinkOptions` validates the options as the rest of the config is validated: an
unknown key, a wrong type or a value out of range fails with the field's path, the value
seen and what is allowed (``task.options.decoder='cosine': expected one of ['dot',
'mlp']``). :func:`gnntrain.tasks.build_task` raises those as :class:`ConfigError` before
any work starts. What each option does is documented in :mod:`gnntrain.tasks.link`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gnntrain.data.link_data import RandomSplit
from samplers.negative import NegativeMode, NegativeSampling

__all__ = ["DECODERS", "EXAMPLES", "LOSSES", "NEGATIVES", "RANKINGS", "LinkOptions"]

Decoder = Literal["dot", "mlp"]
Loss = Literal["bce", "bpr"]
Ranking = Literal["pairs", "items", "per_source"]
Examples = Literal["directed", "undirected"]
EvalNegatives = Literal["uniform", "common_neighbours"]
DECODERS: tuple[str, ...] = get_args(Decoder)
LOSSES: tuple[str, ...] = get_args(Loss)
NEGATIVES: tuple[str, ...] = get_args(NegativeMode)
RANKINGS: tuple[str, ...] = get_args(Ranking)
EXAMPLES: tuple[str, ...] = get_args(Examples)
WHERE = "task.options"


class LinkOptions(BaseModel):
    """The options of the link task, keyword-only, strictly typed (``true``/``false`` for a
    flag, an integer where a count is asked), unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    decoder: Decoder = Field("dot", description="pair scores: <h_u, h_v>, or the model's "
                             "decoder module on h_u * h_v")
    loss: Loss = Field("bce", description="binary cross-entropy on every pair, or BPR per negative")
    negatives: NegativeMode = Field("uniform", description="how training negatives are drawn")
    num_negatives: int = Field(1, ge=1, description="training negatives per positive")
    exclude_targets: bool = Field(False, description="keep a batch's positive edges (and "
                                  "their reverses) out of its sampled blocks")
    hits_k: int = Field(20, ge=1, description="K of Hits@K (and of Recall/NDCG@K)")
    val_frac: float = Field(0.05, ge=0.0, lt=1.0, description="random split: share of "
                            "edges held out for validation")
    test_frac: float = Field(0.1, ge=0.0, lt=1.0, description="random split: share of edges "
                             "held out for test")
    split_seed: int = Field(0, description="random split: its seed")
    keep_train_per_node: bool = Field(True, description="random split: hold an edge out only "
                                      "if both ends keep a training edge")
    ranking: Ranking = Field("pairs", description="evaluation protocol: a shared negative set "
                             "(Hits@K), every item of a user-item graph (Recall@K), or each "
                             "positive's own negatives (MRR)")
    examples: Examples = Field("directed", description="train on both directions of every "
                               "edge, or on each edge once")
    reject_edges: bool = Field(False, description="draw again a negative that is a training "
                               "edge or a self-loop")
    eval_negatives: int = Field(0, ge=0, description="random split: evaluation negatives (0: "
                                "one per held-out edge)")
    eval_negatives_from: EvalNegatives = Field(
        "uniform", description="random split with ranking: per_source: each positive's "
        "eval_negatives drawn uniformly, or common_neighbours: the non-neighbours of its source "
        "with the most common neighbours in the training edges (HeaRT's hard negatives, "
        "Li et al. 2023; ties by a hash, the rest uniform where the two-hop neighbourhood is "
        "smaller)")

    @model_validator(mode="after")
    def _consistent(self) -> LinkOptions:
        if self.reject_edges and self.negatives == "in_batch":
            raise ValueError(f"{WHERE}.reject_edges=true redraws negatives that are edges, but "
                             "negatives='in_batch' draws none (they are other positives' "
                             "destinations): use negatives uniform, uniform_pairs or degree, or "
                             "reject_edges: false")
        if self.eval_negatives_from == "common_neighbours" and not (
                self.ranking == "per_source" and self.eval_negatives > 0):
            raise ValueError(f"{WHERE}.eval_negatives_from=common_neighbours: these are each "
                             "positive's own negatives: set ranking: per_source and "
                             f"eval_negatives >= 1 (now ranking={self.ranking!r}, "
                             f"eval_negatives={self.eval_negatives})")
        if self.val_frac + self.test_frac >= 1.0:
            raise ValueError(f"{WHERE}.val_frac={self.val_frac} + test_frac={self.test_frac} = "
                             f"{self.val_frac + self.test_frac:g}: must be below 1 (the rest trains)")
        return self

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> LinkOptions:
        """The options in ``raw``; ``ValueError`` naming every field that is wrong, its value
        and what is allowed."""
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as e:
            raise ValueError("; ".join(_message(err) for err in e.errors())) from None

    def negative_sampling(self) -> NegativeSampling:
        """The training negatives' sampler config."""
        return NegativeSampling(self.negatives, self.num_negatives, self.reject_edges)

    def random_split(self) -> RandomSplit:
        """How a graph without a stored split is split: one shared set of evaluation
        negatives, or with ``ranking: per_source`` each positive's own."""
        own = self.ranking == "per_source"
        return RandomSplit(val_frac=self.val_frac, test_frac=self.test_frac, seed=self.split_seed,
                           keep_train_per_node=self.keep_train_per_node,
                           shared_negatives=0 if own else self.eval_negatives,
                           per_positive=self.eval_negatives if own else 0,
                           common_neighbour_negatives=self.eval_negatives_from == "common_neighbours")


def _message(err: Any) -> str:
    """One pydantic error as ``task.options.FIELD=VALUE: what is allowed``."""
    loc = err["loc"]
    if not loc:  # a check across fields: its own message names them
        return str(err["ctx"]["error"]) if "error" in err.get("ctx", {}) else err["msg"]
    name = str(loc[0])
    head = f"{WHERE}.{name}={err['input']!r}"
    if name not in LinkOptions.model_fields:
        return f"{head}: not an option of task.kind=link; the options are {sorted(LinkOptions.model_fields)}"
    return f"{head}: {_allowed(name)}"


def _allowed(name: str) -> str:
    """What field ``name`` takes, in words."""
    field = LinkOptions.model_fields[name]
    bounds = {k: getattr(m, k) for m in field.metadata for k in ("ge", "lt") if hasattr(m, k)}
    if field.annotation is bool:
        return "must be true or false"
    if field.annotation is int:
        return f"must be an int >= {bounds['ge']}" if "ge" in bounds else "must be an int"
    if field.annotation is float:
        return f"must lie in [{bounds['ge']:g}, {bounds['lt']:g})"
    return f"expected one of {list(get_args(field.annotation))}"
