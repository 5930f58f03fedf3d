#!/usr/bin/env bash
# Pack what the GPU machine's image lacks into .gpu/ (git-ignored), for bench/gpu_machine/check.sh
# to install there: the pinned cp312 wheels below, and Ray's wheel unpacked without the
# libraries bench.gpu and the CUDA tests never import (RLlib, Data, Serve, LLM, the Java
# jars), as one xz tarball, since the whole wheel (79 MB) is over what a call may carry.
#
#     bash bench/gpu_machine/pack.sh          # needs pip's access to PyPI; about 2 minutes
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.gpu
rm -rf "$dest" && mkdir -p "$dest/wheels"
get() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$1" "${@:2}"
}
# what gnntrain imports that the image has not (it has torch, torch-geometric, numba, numpy,
# scipy, rich, tqdm, pyyaml, psutil, fsspec, pytest, pytest-timeout)
get "$dest/wheels" pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
    cmeel-metis==5.2.1.1 cmeel-gklib==0.0.1 \
    jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
tmp=$(mktemp -d)
get "$tmp" ray==2.60.0
mkdir "$tmp/site" && (cd "$tmp/site" && python3 -m zipfile -e "$tmp"/ray-*.whl .)
rm -rf "$tmp/site/ray/"{rllib,data,serve,llm,jars}
tar -C "$tmp/site" -cf - . | xz -T0 -6 > "$dest/ray-site.tar.xz"
rm -rf "$tmp"
du -csh "$dest"/*
