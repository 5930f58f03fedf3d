"""Benchmarks: ``python -m bench.<name>`` (``--smoke`` for a seconds-long version)."""
