# Two commands on a fresh machine: `make demo` (train on the embedded default) and
# `make test` (the whole suite). Both create .venv first; the pinned torch==2.13.0 is
# the CPU wheel (see README for a CUDA build). `make docs` builds the documentation site
# (strict: a broken link, a missing reference or an undocumented public name fails it).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(VENV)/bin/pip install --disable-pip-version-check -q

# Python writes each module's .pyc the first time a process imports it, whatever the
# environment says (PYTHONDONTWRITEBYTECODE is often set on CI machines), and numba caches
# each compiled kernel beside its module (cache=True): the suite starts hundreds of
# processes that import torch, PyG and Ray and sample, and without both caches every one
# of them would compile them again. At install, one process per core fills both: a
# one-epoch run of the embedded default (torch, PyG, the sampler's kernels) and, beside
# it, Ray byte-compiled whole (every Ray node's agents import modules of their own), the
# other libraries imported and a 2-part partitioning (its kernels); about 20 s, where
# byte-compiling all of site-packages took about 30 s and left the kernels to the suite.
unexport PYTHONDONTWRITEBYTECODE
PURELIB = $$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
TINY := datasets/synthetic-tiny.yaml

# uv installs the same pinned set as pip in about a quarter of the time (about 14 s against
# 46 s here, cold cache): it resolves and unpacks wheels in parallel. It does not read
# pip's configuration, so pip's find-links (where a machine keeps wheels such as the CPU
# torch) are handed to it; where uv cannot be had, pip installs.
REQS := torch==2.13.0 -e '.[test,docs]'
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	links="$${PIP_FIND_LINKS:-$$($(VENV)/bin/pip config get global.find-links 2>/dev/null)}"; \
	if $(PIP_INSTALL) uv 2>/dev/null; then \
	  $(VENV)/bin/uv pip install -q --python $(PY) $$(for d in $$links; do echo --find-links $$d; done) $(REQS); \
	else $(PIP_INSTALL) --no-compile $(REQS); fi
	tmp=$$(mktemp -d) && ( \
	  $(PY) -m gnntrain.run --config $(TINY) --single-process --no-progress --set train.epochs=1 \
	    --set train.run_root=$$tmp/runs > /dev/null & pid=$$!; \
	  $(PY) -m compileall -q -j 0 $(PURELIB)/ray > /dev/null \
	  && $(PY) -c 'import ray.tune, pandas, pyarrow, s3fs, moto, sklearn, xdist' \
	  && $(PY) -m partition --config $(TINY) --parts 2 --root $$tmp/parts --out $$tmp/report --no-plot > /dev/null \
	  && wait $$pid ); status=$$?; rm -rf $$tmp; exit $$status
	touch $@

# Real datasets for the test suite, the demo and the smoke benchmark: $GNNTRAIN_DATA if
# set, else the shared store beside the checkout (the library itself defaults to
# ~/.cache/gnntrain/datasets; see docs/reference/datasets.md).
GNNTRAIN_DATA ?= $(abspath ../shared/datasets)
test demo tutorials bench-smoke: export GNNTRAIN_DATA := $(GNNTRAIN_DATA)

.PHONY: install demo test lint docs tutorials bench-smoke
install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m gnntrain.run --config datasets/synthetic-tiny.yaml --workers 2

# Two pytest processes, each module whole on one of them (its module fixtures built once),
# each with its own local Ray: the suite is CPU-bound on two cores, not wait-bound. Modules
# are handed out in collection order (tests/conftest.py puts the longest first), not
# xdist's default of the most tests first, which left the longest modules for the end.
TEST_WORKERS ?= 2
test: $(VENV)/.installed
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 tests

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check gnntrain partition samplers bench tests examples docs/hooks docs/check_tutorials.py
	$(VENV)/bin/mypy gnntrain partition samplers bench examples docs/hooks docs/check_tutorials.py

# The site goes to build/site (git-ignored); nothing is fetched from the network.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Every tutorial's marked commands, at the sizes its markers give (docs/check_tutorials.py).
tutorials: $(VENV)/.installed
	$(PY) docs/check_tutorials.py

bench-smoke: $(VENV)/.installed
	$(PY) -m bench.smoke
