"""Models: the protocol every model follows, the built-in ones, and the PyG adapter.

See :mod:`gnntrain.models.protocol` for the protocol and how ``model.arch`` names a
model (a built-in name or ``package.module:factory``).
"""

from gnntrain.config.plugins import import_object
from gnntrain.models.builtin import BlockGNN, GCNBlockConv
from gnntrain.models.protocol import (
    SPARSE_INPUT_DENSITY,
    BlockModel,
    BlockNeeds,
    Encoder,
    LayerwiseModel,
    ModelFactory,
    ModelSpec,
    accepts_sparse_input,
    block_needs,
    flat_grads,
    has_layerwise,
    input_encoder,
    needs_degrees,
    set_flat_grads,
)
from gnntrain.models.pyg import PygLayers
from gnntrain.models.registry import BUILTIN, build_model, resolve_factory

__all__ = [
    "BUILTIN", "SPARSE_INPUT_DENSITY", "BlockGNN", "BlockModel", "BlockNeeds", "Encoder", "LayerwiseModel", "GCNBlockConv", "ModelFactory", "ModelSpec", "PygLayers",
    "accepts_sparse_input", "block_needs", "build_model", "flat_grads", "has_layerwise", "import_object", "input_encoder", "needs_degrees",
    "resolve_factory", "set_flat_grads",
]
