"""gnntrain: distributed mini-batch GNN training on Ray.

Importing this package is cheap: it loads neither Ray nor torch. The data path reads
``partition`` -> ``samplers`` -> ``gnntrain.runtime``; ``gnntrain.run`` shows it whole.
"""

__version__ = "0.1.0"
