"""``python -m gnntrain.predict RUN_DIR``: every node's predictions or embeddings, written by the workers.

Examples::

    python -m gnntrain.predict runs/cora-20261130-081500                      # logits
    python -m gnntrain.predict runs/cora-20261130-081500 --what probs --out probs/
    python -m gnntrain.predict runs/cora-20261130-081500 --what embeddings --layer 1
    python -m gnntrain.predict runs/cora-20261130-081500 --single-process    # one process
    python -m gnntrain.predict runs/ddi-20261130-081500 --pairs pairs.csv    # link scores

``--pairs FILE`` scores the given node pairs of a link-prediction run instead
(:mod:`gnntrain.predict.pairs`).

The run's own config (``config.yaml``), partition set (the path ``partition.json``
records, or the stored set ``build_training_set`` finds again) and worker count are
used: the same Ray workers as training start, each loads the newest checkpoint, and
**exact layer-wise inference** runs over the full graph (every node's rows computed once
per layer over all its in-neighbours, the loop evaluation uses). Each worker then writes
the rows of the nodes it owns itself; the coordinator only writes the manifest, so no
process ever holds the whole matrix. ``--out`` may be an object-store URI
(``s3://bucket/predictions/logits``, reached with ``--storage-options``): each worker
uploads its shard there and the manifest goes last; :func:`read_predictions` reads a
URI back, checking every file against the manifest.

``--what``
    ``logits`` (the model's outputs) and ``probs`` go through the task's
    :meth:`~gnntrain.tasks.Task.predict`; ``embeddings`` are the rows after layer
    ``--layer L`` (``0 < L <= num_layers``; default ``num_layers - 1``, the input of the
    last layer, or ``1`` for a one-layer model; ``--layer 0`` is the model's input rows in a
    run with ``model.node_embedding``). ``node_embedding`` is the learned input table
    itself (``model.node_embedding.dim`` columns), written by the workers that own its
    rows. A task may add its own kinds through ``Task.predict``; ``embeddings`` and
    ``node_embedding`` are task-independent.
Models without ``layer(i, block, h)`` are refused: sampled inference would make every
node's result depend on a random neighbourhood and on the partitioning, which a
prediction export must not.

Output layout (default ``RUN_DIR/predictions/<what>`` or ``.../embeddings-layer<L>``)::

    <out>/
    ├── manifest.json      what was written (fields below)
    ├── part-0.npy         values of part 0's nodes, [rows, width] (float32)
    ├── part-0.ids.npy     their ORIGINAL node ids, int64 [rows]
    ├── part-1.npy
    └── part-1.ids.npy

With ``--format parquet`` each part is one ``part-<p>.parquet`` instead (columns ``id``
int64 and ``value`` a fixed-size list of ``width`` floats). ``manifest.json``:

* ``format_version`` — 1; a reader refuses any other.
* ``what``, ``layer`` — the kind of rows and the layer they come after (``num_layers``
  for logits/probs).
* ``format``, ``dtype``, ``width`` — ``npy`` or ``parquet``; dtype and width of every value row.
* ``total_rows`` — rows over all shards (= nodes of the graph, each exactly once).
* ``shards`` — per part: ``part``, ``rows``, ``shape``, ``dtype`` and ``files``
  (role ``values``/``ids`` or ``table`` -> ``name``, ``bytes``, ``sha256``).
* ``run_dir``, ``checkpoint_epoch``, ``workers`` — the run, the epochs its checkpoint had
  trained, and the workers (= shards) that wrote the rows.

The workers write into a directory beside ``<out>``: on a cluster ``<out>`` must lie on a
file system every worker can write. The directory has a temporary name until it is
complete and is then renamed into place; an existing ``<out>`` is only replaced with ``--force``.
:func:`read_predictions` assembles the shards in original-id order with numpy alone,
one shard in memory at a time.
"""

from gnntrain.predict.cli import main, parse_args
from gnntrain.predict.format import (
    FORMAT_VERSION,
    FileEntry,
    Manifest,
    PredictError,
    Shard,
    read_manifest,
    read_predictions,
)
from gnntrain.predict.nodes import WHATS, predict
from gnntrain.predict.pairs import predict_pairs, read_pairs

__all__ = ["FORMAT_VERSION", "WHATS", "FileEntry", "Manifest", "PredictError", "Shard", "main", "parse_args",
           "predict", "predict_pairs", "read_manifest", "read_pairs", "read_predictions"]
