"""The link task's options as a typed model: defaults, and errors that name the field,
the value and what is allowed."""

from __future__ import annotations

import pytest

from gnntrain.config import ConfigError
from gnntrain.tasks import LinkPrediction, build_task
from gnntrain.tasks.link_options import LinkOptions


def test_defaults() -> None:
    o = LinkOptions()
    assert (o.decoder, o.loss, o.negatives, o.num_negatives, o.exclude_targets, o.hits_k) == (
        "dot", "bce", "uniform", 1, False, 20)
    assert (o.val_frac, o.test_frac, o.split_seed, o.keep_train_per_node) == (0.05, 0.1, 0, True)
    assert (o.ranking, o.examples, o.reject_edges, o.eval_negatives) == ("pairs", "directed", False, 0)


@pytest.mark.parametrize(("raw", "message"), [
    ({"decoder": "cosine"}, r"task.options.decoder='cosine': expected one of \['dot', 'mlp'\]"),
    ({"exclude_targets": "yes"}, "task.options.exclude_targets='yes': must be true or false"),
    ({"hits_k": 2.0}, "task.options.hits_k=2.0: must be an int >= 1"),
    ({"num_negatives": True}, "task.options.num_negatives=True: must be an int >= 1"),
    ({"val_frac": 1.5}, r"task.options.val_frac=1.5: must lie in \[0, 1\)"),
    ({"split_seed": "a"}, "task.options.split_seed='a': must be an int$"),
    ({"num_negative": 3}, r"task.options.num_negative=3: not an option of task.kind=link; the "
                          r"options are \['decoder', "),
    ({"ranking": "all", "loss": "mse"},
     r"task.options.loss='mse': expected one of \['bce', 'bpr'\]; task.options.ranking='all'"),
])
def test_errors_name_field_value_and_what_is_allowed(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LinkOptions.parse(raw)
    with pytest.raises(ConfigError, match=message):
        build_task("link", raw)


def test_the_task_takes_a_model_or_keywords() -> None:
    opts = LinkOptions(hits_k=5, negatives="degree")
    assert LinkPrediction(opts).options == LinkPrediction(hits_k=5, negatives="degree").options == opts
    assert LinkPrediction(opts).hits_k == 5
    with pytest.raises(TypeError, match="not both"):
        LinkPrediction(opts, hits_k=5)
    assert LinkPrediction(ranking="per_source").metric == "mrr"
    assert LinkPrediction(ranking="items").metric == "recall"
