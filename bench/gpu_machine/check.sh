#!/usr/bin/env bash
# The GPU machine's check: the CUDA tests, then bench.gpu on synthetic-small (single process,
# 1 and 4 Ray workers; host and device draw) and on the ogbn-products-shaped graph (single
# process; both draws), in one call of at most 8 minutes; STEPS=products4 (4 workers on the
# products-shaped graph, after a 4-part METIS partitioning of about 2 1/2 minutes) is a
# second call of at most 7. Each step has its own time limit, so a slow one leaves the
# others' output; logs and JSON go to $OUT (or bench/out/gpu-check). Run it from the
# repository root with .gpu/ (bench/gpu_machine/pack.sh) beside it; STEPS picks steps by
# name (default: "env tests small products").
set -uo pipefail
out=${OUT:-bench/out/gpu-check}
mkdir -p "$out"
site=$(mktemp -d)
if [ -d .gpu ]; then
    tar -C "$site" -xJf .gpu/ray-site.tar.xz &&
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$site" .gpu/wheels/*.whl || { echo "installing .gpu failed"; exit 1; }
fi
export PYTHONPATH=$site:$PWD PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
steps=${STEPS:-env tests small products}
step() {  # step NAME SECONDS COMMAND...: run it with a time limit, its output to $out/NAME.log
    local name=$1 limit=$2; shift 2
    case " $steps " in *" $name "*) ;; *) return 0 ;; esac
    echo "== $name (limit ${limit}s): $*"
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" > "$out/$name.log" 2>&1
    echo "== $name: exit $? after $((SECONDS - t0)) s"
    tail -n 25 "$out/$name.log"
}
step env 30 bash -c 'nvidia-smi; python3 -c "import torch, ray, torch_geometric as g; print(torch.__version__, ray.__version__, g.__version__, torch.cuda.get_device_name(0))"'
step tests 90 python3 -m pytest -q -p no:cacheprovider tests/samplers/test_device.py tests/test_precision.py \
    tests/samplers/test_batch.py tests/samplers/test_csr_path.py tests/runtime/test_routing.py \
    tests/partition/test_feature_rows.py
step small 150 python3 -m bench.gpu --graph small --modes single,1,4 --precision fp32 --sampler numba,torch \
    --out "$out/gpu-small.json"
step products 180 python3 -m bench.gpu --graph products --modes single --precision fp32 --sampler numba,torch \
    --epochs 2 --out "$out/gpu-products.json"
step products4 400 python3 -m bench.gpu --graph products --modes 4 --precision fp32 --sampler numba,torch \
    --epochs 2 --out "$out/gpu-products4.json"
