"""The start every DGL peer script shares (``bench/_dgl_*.py``, run by ``$GNNTRAIN_DGL_PYTHON``
as ``script GRAPH.npz SETTINGS_JSON``): imports only numpy, torch and dgl."""

import json
import sys
from typing import Any

import dgl
import numpy as np
import torch


def peer_start() -> tuple[dict[str, Any], Any]:
    """The settings and the graph ``.npz`` of the command line, with torch's thread count
    and every seed (torch, numpy, dgl) set from the settings' ``threads`` and ``seed``."""
    path, raw = sys.argv[1], sys.argv[2]
    s = json.loads(raw)
    torch.set_num_threads(int(s["threads"]))
    torch.manual_seed(int(s["seed"]))
    np.random.seed(int(s["seed"]))
    dgl.seed(int(s["seed"]))
    return s, np.load(path)
