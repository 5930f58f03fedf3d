"""Training from a partition set on object storage, against the same run from a local
directory, measured in the same run.

    python -m bench.storage            # synthetic-small (100k nodes, 2M edges), 2 Ray workers
    python -m bench.storage --smoke    # a 3k-node graph (seconds)

An S3 server (moto's, in a thread of this process, on 127.0.0.1) holds the set. The same
config trains three times, back to back: from a local ``partition.root``; from
``s3://`` with an empty ``cluster.scratch_dir`` (the coordinator and both workers stage
what they read); and from ``s3://`` again on the same scratch (staged copies reused).
Then a plain s3fs ``get`` of each worker's files (one thread per worker, as the workers
staged side by side) times the client alone.

* ``bytes``: per worker, the bytes it copied from the store (``summary.json``'s
  ``staging``) against the manifest's sizes of the files it reads: its own part's files
  exactly, the set-level files once per node (the first process on the node copies them);
  the coordinator's part bytes (its own record, ``staging_coordinator``; must be 0).
* ``throughput``: the bytes the workers copied over the staging wall time (the slower
  worker's ``seconds``: opening the store and reading the manifest in a new process
  included; also without them, ``copy_ratio``) against a plain ``get`` of the same files
  in a new process (s3fs imported and opened there too, then one thread per worker's
  files). Target >= 0.8x.
* ``epoch``: the mean epoch time from the second epoch on, s3 run over local run. Target:
  within noise (<= 1.1x).
* checks: the s3 runs end with the local run's loss, metrics and final parameters (every
  rank's digest); each worker copies its own part and no other; the coordinator copies no
  part; the second s3 run copies nothing.

JSON: bench/out/storage.json (``storage-smoke.json``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.epoch import SMOKE, WORKLOAD
from bench.harness.cli import bench_parser
from bench.harness.paths import OUT, bench_config, out_path
from bench.harness.runs import quiet, read_metrics, timed
from bench.harness.s3 import new_bucket, s3_server
from bench.harness.system import loadavg, machine
from bench.harness.verdict import Check, check, finish
from gnntrain.checkpoint import load_latest
from gnntrain.rundir import RunDir
from partition.storage import FsspecStore


def _run(cfg: Any) -> dict[str, Any]:
    from gnntrain.runtime.coordinator import run_training

    s = run_training(cfg, progress=False, console=quiet())
    eps = read_metrics(s)
    ckpt = load_latest(RunDir(Path(s["run_dir"])))
    assert ckpt is not None
    return {"summary": s, "losses": [e["loss"] for e in eps],
            "epoch_s": float(np.mean([e["epoch_s"] for e in timed(eps)])),
            "final": s["final"], "digests": ckpt["rank_digests"]}


_PLAIN_GET = """
import json, sys, tempfile, threading, time
t0 = time.perf_counter()
import s3fs
files, base, options = json.loads(sys.argv[1])
fs = s3fs.S3FileSystem(**options)
opened = time.perf_counter()
with tempfile.TemporaryDirectory() as tmp:
    def get(i, rels):
        fs.get([f"{base}/{r}" for r in rels], [f"{tmp}/{i}/{r}" for r in rels])
    threads = [threading.Thread(target=get, args=(i, rels)) for i, rels in enumerate(files)]
    t1 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = time.perf_counter()
print(json.dumps({"total_s": end - t0, "copy_s": end - t1, "open_s": opened - t0}))
"""


def _plain_get(files: list[list[str]], uri: str, options: dict[str, Any]) -> dict[str, float]:
    """A plain s3fs ``get`` of each list of files, one thread per list, side by side, in a
    new process (which imports s3fs and opens the file system, as a worker does): its
    seconds in all and copying alone."""
    arg = json.dumps([files, uri.removeprefix("s3://"), options])
    done = subprocess.run([sys.executable, "-c", _PLAIN_GET, arg], capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="a 3k-node graph, tiny model (seconds)")
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args(argv)
    tag = "storage-smoke" if args.smoke else "storage"
    work = OUT / tag
    shutil.rmtree(work, ignore_errors=True)
    base = [*WORKLOAD, *(SMOKE if args.smoke else []), f"train.epochs={args.epochs}", "train.eval_every=100",
            "cluster.workers=2", "partition.parts=2", "train.checkpoint_every=1"]
    checks: list[Check] = []
    out: dict[str, Any] = {"machine": machine(), "argv": list(argv or []), "loadavg_before": loadavg()}

    with s3_server() as endpoint:
        uri, options = new_bucket(endpoint, "bench")
        store = [f"partition.root={uri}/parts", f"partition.storage_options={json.dumps(options)}",
                 f"cluster.scratch_dir={work / 'scratch'}"]
        local = _run(bench_config("synthetic-small.yaml", [*base, f"partition.root={work / 'parts'}"], tag))
        print(f"local directory: epoch {local['epoch_s']:.2f} s, loss {local['losses'][-1]:.4f}")
        remote = _run(bench_config("synthetic-small.yaml", [*base, *store], tag))
        print(f"s3, empty scratch: epoch {remote['epoch_s']:.2f} s, loss {remote['losses'][-1]:.4f}")
        again = _run(bench_config("synthetic-small.yaml", [*base, *store], tag))
        print(f"s3, staged copies: epoch {again['epoch_s']:.2f} s, loss {again['losses'][-1]:.4f}")

        [start] = remote["summary"]["staging"]
        workers = start["workers"]
        set_uri = workers[0]["source"]
        manifest = json.loads(FsspecStore(set_uri, options).read_bytes("meta.json"))
        sizes = {rel: int(f["bytes"]) for rel, f in manifest["files"].items()}
        get_s = _plain_get([w["fetched"] for w in workers], set_uri, options)
    coordinator = remote["summary"]["staging_coordinator"]  # the set-level files it read, staged

    rows = []
    for w in workers:
        own_part = {r for r in sizes if r.startswith(f"part-{w['rank']}/")}
        set_level = {r for r in sizes if not r.startswith("part-")}
        got_part = {r for r in w["fetched"] if r.startswith("part-")}
        rows.append({"rank": w["rank"], "fetched_bytes": w["fetched_bytes"], "own_part_bytes":
                     sum(sizes[r] for r in own_part), "set_level_fetched": len(set(w["fetched"]) & set_level),
                     "seconds": w["seconds"], "open_seconds": w["open_seconds"]})
        checks.append(check(f"worker {w['rank']} copies exactly its own part's files", got_part == own_part,
                            f"copied {sorted(got_part)}"))
        checks.append(check(f"worker {w['rank']} copies no file but its own and the set's",
                            set(w["fetched"]) <= own_part | set_level and
                            w["fetched_bytes"] == sum(sizes[r] for r in w["fetched"]),
                            f"{w['fetched_bytes']} bytes"))
    driver_parts = [r for r in coordinator["fetched"] if r.startswith("part-")]
    checks.append(check("the coordinator copies no part", not driver_parts, f"copied {driver_parts}"))
    [again_start] = again["summary"]["staging"]
    checks.append(check("the second s3 run copies nothing", all(not w["fetched"] for w in again_start["workers"])
                        and not again["summary"]["staging_coordinator"]["fetched"],
                        f"{sum(w['fetched_bytes'] for w in again_start['workers'])} bytes"))
    for name, run in (("s3", remote), ("s3 again", again)):
        checks.append(check(f"the {name} run ends where the local run ends",
                            run["losses"] == local["losses"] and run["digests"] == local["digests"]
                            and run["final"] == local["final"],
                            f"losses {run['losses']} vs {local['losses']}"))

    staged_bytes = sum(w["fetched_bytes"] for w in workers)
    staging_s = max(w["seconds"] for w in workers)
    copy_s = max(w["seconds"] - w["open_seconds"] for w in workers)
    throughput = {"staged_bytes": staged_bytes, "staging_s": staging_s, "copy_s": copy_s,
                  "plain_get_s": get_s["total_s"], "plain_get_copy_s": get_s["copy_s"],
                  "ratio": get_s["total_s"] / staging_s, "copy_ratio": get_s["copy_s"] / copy_s}
    epoch = {"local_s": local["epoch_s"], "s3_s": remote["epoch_s"], "s3_again_s": again["epoch_s"],
             "ratio": remote["epoch_s"] / local["epoch_s"], "ratio_again": again["epoch_s"] / local["epoch_s"]}
    out.update(workers=rows, coordinator={"fetched": coordinator["fetched"],
                                          "fetched_bytes": coordinator["fetched_bytes"],
                                          "part_bytes": sum(sizes[r] for r in driver_parts)},
               throughput=throughput, epoch=epoch, set_bytes=sum(sizes.values()), loadavg_after=loadavg())
    for r in rows:
        print(f"worker {r['rank']}: copied {r['fetched_bytes'] / 2**20:.1f} MiB (its part's files "
              f"{r['own_part_bytes'] / 2**20:.1f} MiB, {r['set_level_fetched']} set-level files) in "
              f"{r['seconds']:.2f} s")
    print(f"coordinator: copied {out['coordinator']['fetched_bytes'] / 2**20:.2f} MiB of set-level files, "
          f"{out['coordinator']['part_bytes']} bytes of parts")
    ok = "met" if throughput["ratio"] >= 0.8 else "missed"
    print(f"staging: {staged_bytes / 2**20:.1f} MiB in {staging_s:.2f} s ({copy_s:.2f} s copying, the rest "
          f"opening the store) against a plain s3fs get in a new process in {get_s['total_s']:.2f} s "
          f"({get_s['copy_s']:.2f} s copying): {throughput['ratio']:.2f}x the client's throughput, "
          f"{throughput['copy_ratio']:.2f}x copying alone (target >= 0.8x: {ok})")
    ok = "met" if epoch["ratio"] <= 1.1 else "missed"
    print(f"epoch from the second on: s3 {epoch['s3_s']:.2f} s / local {epoch['local_s']:.2f} s = "
          f"{epoch['ratio']:.2f}x, staged again {epoch['ratio_again']:.2f}x (target <= 1.1x: {ok}); "
          f"load {out['loadavg_before']:.1f}-{out['loadavg_after']:.1f}")
    shutil.rmtree(work, ignore_errors=True)
    return finish("storage", checks, out, out_path("storage", smoke=args.smoke))


if __name__ == "__main__":
    raise SystemExit(main())
