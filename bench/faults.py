"""Fault drills: inject each failure the runtime must survive and check the result.

    python -m bench.faults              # every scenario once (about 5 min)
    python -m bench.faults --smoke      # one worker exit (seconds)
    python -m bench.faults --repeat 20  # every scenario 20 times, cores saturated: k/N identical
    python -m bench.faults --restart-all  # cluster.keep_survivors=false: every rank started anew

``--repeat N`` runs every scenario N times while busy-loop processes (one per core, started
and always stopped by this module, at the niceness Ray gives its workers) saturate the
machine, each run partitioning the graph
afresh (the partition is part of what must be reproducible), and reports per scenario how
many of the N runs ended bit-identical to the undisturbed run: the model and optimizer
state of every rank (the checkpoint's ``rank_digests``), not only rank 0's parameters.

Every scenario trains the same small run (synthetic 1,500 nodes, 2 Ray workers, 4
epochs, a checkpoint every epoch, collective timeout 8 s) and must finish with final
parameters **equal** to an undisturbed run of the same config: every random stream is
derived from (seed, epoch, step, rank) and checkpoints are taken at epoch boundaries,
so redone epochs reproduce the lost ones bit for bit. Scenarios:

* ``exit e/s``: worker 1 calls ``os._exit`` at epoch e, step s (three points);
* ``external kill``: SIGKILL to one of this run's worker processes after the first
  checkpoint (only descendants of this process are candidates);
* ``raise``: worker 0 raises at epoch 1, step 2;
* ``stall``: worker 1 stops answering at epoch 2, step 1 (its peer's all-reduce times out);
* ``node loss (shrink)``: one of the two nodes leaves the cluster for good in epoch 2, with
  ``cluster.on_worker_loss=shrink``: the surviving node adopts the lost rank's part and runs
  both ranks (simulated nodes, ``bench.nodes``, in a subprocess with a Ray cluster of its own);
* ``coordinator kill + resume``: ``python -m gnntrain.run`` in a subprocess is killed
  (SIGKILL) after its second checkpoint, then ``--resume``\\ d to 4 epochs in this process.

Recovery time is ``failures.json``'s ``recovery_s`` (failure detected -> new workers
ready); ``detect s`` is its ``after_s`` (attempt start -> failure detected). JSON goes to
bench/out/faults.json (``faults-smoke.json``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import yaml

from bench.harness.cli import bench_parser
from bench.harness.paths import OUT, REPO, out_path, run_root
from bench.harness.runs import quiet
from bench.harness.system import machine
from bench.harness.verdict import check, conclude
from bench.nodes import spawn_drill
from gnntrain.checkpoint import load_latest, state_digest
from gnntrain.config import RunConfig, load_config
from gnntrain.rundir import RunDir
from gnntrain.runtime.ray_group import worker_processes


def raw_config(root: Path) -> dict[str, Any]:
    return {
        "dataset": {"name": "faults", "source": "synthetic",
                    "synthetic": {"nodes": 1500, "avg_degree": 8, "features": 16, "classes": 5, "seed": 3}},
        "partition": {"parts": 2, "root": str(root / "parts")},
        "sampler": {"fanouts": [5, 5], "batch_size": 32, "prefetch": 1},
        "model": {"hidden": 16, "layers": 2, "dropout": 0.2},
        "train": {"epochs": 4, "checkpoint_every": 1, "keep_checkpoints": 10,
                  "run_root": str(root / "runs")},
        "cluster": {"workers": 2, "call_timeout_s": 60, "collective_timeout_s": 8,
                    "stall_timeout_s": 300},
    }


def params(run_dir: Path) -> dict[str, Any]:
    """The run's final checkpoint: model, optimizer, and every rank's state digest."""
    ckpt = load_latest(RunDir(run_dir))
    if ckpt is None:
        raise RuntimeError(f"{run_dir} has no checkpoint")
    return ckpt


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Bit-identical model and optimizer state, on every rank of ``a``."""
    want = state_digest(b)
    return state_digest(a) == want and all(d == want for d in a.get("rank_digests") or [want])


# Ray starts its worker processes at this niceness (its ``worker_niceness`` setting; the
# driver and Ray's daemons stay at 0)
RAY_WORKER_NICENESS = int(os.environ.get("RAY_worker_niceness", "15"))


@contextmanager
def saturated(procs: int) -> Iterator[list[int]]:
    """``procs`` busy-loop processes for the duration (none for 0); always killed.

    They run at the niceness Ray gives its workers, so they compete with the workers as
    equals: at niceness 0 they would take ~30 times a worker's share of a core and the
    drill would measure starvation (a 27 s run took 390 s) rather than interleaving.
    """
    code = f"import os; os.nice({RAY_WORKER_NICENESS})\nwhile True: pass"
    busy = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(procs)]
    try:
        yield [p.pid for p in busy]
    finally:
        for p in busy:
            p.kill()
        for p in busy:
            p.wait(timeout=30)


def run_case(name: str, cfg: RunConfig, ref: dict[str, Any] | None,
             killer: bool = False) -> dict[str, Any]:
    from gnntrain.runtime.coordinator import run_training

    killed: list[int] = []
    stop = threading.Event()

    runs = Path(cfg.train.run_root)
    earlier = set(runs.glob("*"))  # other scenarios' run directories (their checkpoints do not count)

    def kill_one() -> None:
        while not stop.is_set() and not killed:
            procs = worker_processes()
            if procs and any(p.parent.parent not in earlier for p in runs.glob("*/checkpoints/ckpt-*.pt")):
                procs[0].send_signal(signal.SIGKILL)
                killed.append(procs[0].pid)
                return
            time.sleep(0.05)

    t = threading.Thread(target=kill_one, daemon=True) if killer else None
    t0 = time.perf_counter()
    if t is not None:
        t.start()
    try:
        s = run_training(cfg, progress=False, console=quiet())
        err = None
    except Exception as e:  # noqa: BLE001 - a drill that fails is a result, not a crash
        s, err = None, f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        stop.set()
        if t is not None:
            t.join(timeout=5)
    return result_row(name, cfg, s, err, time.perf_counter() - t0, ref,
                      injected=cfg.faults.kind != "none" or bool(killed))


def result_row(name: str, cfg: RunConfig, s: dict[str, Any] | None, err: str | None, wall: float,
               ref: dict[str, Any] | None, injected: bool) -> dict[str, Any]:
    """A scenario's row from its run's summary ``s`` (None when the run raised ``err``)."""
    row: dict[str, Any] = {"scenario": name, "wall_s": wall, "error": err, "injected": int(injected),
                           "finished": s is not None and s["epochs"] == cfg.train.epochs}
    if s is not None:
        fails = s.get("failures") or []
        row.update({"failures": len(fails), "recovery_s": [f.get("recovery_s") for f in fails],
                    "detect_s": [f.get("after_s") for f in fails],
                    "epochs_redone": [f.get("epochs_redone") for f in fails],
                    "blamed": [f.get("worker") for f in fails], "run_dir": s["run_dir"],
                    "restarted": [f.get("restarted_ranks") for f in fails],
                    "moves": [m for f in fails for m in f.get("moves") or []]})
        if ref is not None:
            row["correct"] = same(params(Path(s["run_dir"])), ref)
    return row


NODE_LOSS = "node loss (shrink)"
NODE_LOSS_OVERRIDES = ["cluster.on_worker_loss=shrink", "cluster.replace_timeout_s=5",
                       "cluster.collective_timeout_s=60", "train.max_failures=1", "faults.kind=stall",
                       "faults.rank=1", "faults.epoch=2", "faults.step=0"]
NODE_DRILL_LIMIT_S = 900


def node_loss(root: Path, overrides: list[str], ref: dict[str, Any]) -> dict[str, Any]:
    """The second of two simulated nodes (``bench.nodes``: one one-CPU raylet per worker, in
    a subprocess of its own) leaves the cluster for good in epoch 2: worker 1 holds the run
    still at epoch 2, step 0 until the epoch-2 checkpoint exists, then the node goes, with
    whichever rank Ray placed on it. With ``cluster.on_worker_loss=shrink`` the surviving
    node runs both ranks. ``overrides`` come after :data:`NODE_LOSS_OVERRIDES`."""
    root.mkdir(parents=True, exist_ok=True)
    raw, overrides = raw_config(root), [*NODE_LOSS_OVERRIDES, *overrides]
    cfg = load_config(raw=raw, overrides=overrides)
    (root / "drill-config.json").write_text(json.dumps({"raw": raw, "overrides": overrides, "remove": 1,
                                                        "after_epoch": 2}))
    t0 = time.perf_counter()
    got, why = spawn_drill("bench.nodes", root, NODE_DRILL_LIMIT_S, REPO)
    wall = time.perf_counter() - t0
    if got is None:
        return result_row(NODE_LOSS, cfg, None, why[-300:], wall, ref, True)
    row = result_row(NODE_LOSS, cfg, got.get("summary"), got.get("error"), wall, ref, injected=got["removed"])
    row.update(removed_node=got["removed_node"], alive_nodes_after=got["alive_nodes"])
    return row


def coordinator_kill(root: Path, ref: dict[str, Any]) -> dict[str, Any]:
    """SIGKILL ``python -m gnntrain.run`` after its second checkpoint, then resume here."""
    from gnntrain.runtime.coordinator import run_training

    cfg_path = root / "faults.yaml"
    cfg_path.write_text(yaml.safe_dump(raw_config(root / "coord")))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gnntrain.run", "--config", str(cfg_path),
                             "--no-progress", "--set", "train.epochs=40"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ckpt: list[Path] = []
    descendants: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                descendants = psutil.Process(proc.pid).children(recursive=True) or descendants
            except psutil.Error:
                pass
            ckpt = list((root / "coord" / "runs").glob("faults-*/checkpoints/ckpt-00002.pt"))
            if ckpt:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    t_kill = time.perf_counter()
    row: dict[str, Any] = {"scenario": "coordinator kill + resume", "injected": 1, "finished": False,
                           "correct": False, "error": None}
    if not ckpt:
        row["error"] = "the run never reached its second checkpoint"
        return row
    deadline = time.monotonic() + 60  # its Ray workers must go away with it
    while time.monotonic() < deadline and [p for p in descendants if _alive(p) and _is_worker(p)]:
        time.sleep(0.5)
    left = [p.pid for p in descendants if _alive(p) and _is_worker(p)]
    run_dir = ckpt[0].parent.parent
    last = load_latest(RunDir(run_dir))
    done = int(last["epochs_done"]) if last else 0
    logged = len(RunDir(run_dir).metrics())  # epochs the killed run finished
    t_resume = time.perf_counter()
    try:
        resumed = run_training(load_config(raw=RunDir(run_dir).read_config_raw(),
                                           overrides=["train.epochs=4"]),
                               resume=RunDir(run_dir), progress=False, console=quiet())
    except Exception as e:  # noqa: BLE001
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return row
    row.update({"finished": resumed["epochs"] == 4, "correct": same(params(run_dir), ref),
                "workers_left_after_kill": left, "resume_s": time.perf_counter() - t_resume,
                "workers_gone_s": t_resume - t_kill, "wall_s": time.perf_counter() - t0,
                "epochs_redone": [logged - done], "resumed_from_epoch": done, "failures": 0, "run_dir": str(run_dir)})
    return row


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _is_worker(p: psutil.Process) -> bool:
    try:
        return "GnnWorker" in " ".join(p.cmdline()) + p.name()
    except psutil.Error:
        return False


def _record(rows: list[dict[str, Any]], row: dict[str, Any], rep: int, repeat: int, partial: Path) -> None:
    """Add a run's row, print it, and rewrite ``partial`` with the rows so far (a long
    ``--repeat`` stopped early keeps them)."""
    rows.append({**row, "repeat": rep})
    print(f"  [{rep + 1}/{repeat}] {row['scenario']}: "
          f"{'ok' if row.get('correct') else 'WRONG' if row['finished'] else 'failed'} "
          f"({row.get('wall_s', float('nan')):.1f} s){' ' + row['error'] if row['error'] else ''}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    partial.write_text(json.dumps(rows, indent=1, default=str))


def _fmt(v: list[Any] | None) -> str:
    if not v:
        return "-"
    return ",".join("-" if x is None else (f"{x:.1f}" if isinstance(x, float) else str(x)) for x in v)


def plan(smoke: bool) -> list[tuple[str, list[str], bool]]:
    """(scenario, config overrides, kill a worker from outside) of every Ray scenario."""
    cases: list[tuple[str, list[str], bool]] = [
        ("exit 0/1", ["train.max_failures=1", "faults.kind=exit", "faults.rank=1", "faults.epoch=0",
                      "faults.step=1"], False)]
    if smoke:
        return cases
    return cases + [
        ("exit 1/0", ["train.max_failures=1", "faults.kind=exit", "faults.rank=1", "faults.epoch=1",
                      "faults.step=0"], False),
        ("exit 2/5", ["train.max_failures=1", "faults.kind=exit", "faults.rank=1", "faults.epoch=2",
                      "faults.step=5"], False),
        ("external kill", ["train.max_failures=2"], True),
        ("raise 1/2", ["train.max_failures=1", "faults.kind=raise", "faults.rank=0", "faults.epoch=1",
                       "faults.step=2"], False),
        ("stall 2/1", ["train.max_failures=1", "faults.kind=stall", "faults.rank=1", "faults.epoch=2",
                       "faults.step=1"], False),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="one worker exit, 2 epochs (seconds)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run every scenario N times with the cores saturated (default 1: once, no load)")
    ap.add_argument("--restart-all", action="store_true",
                    help="cluster.keep_survivors=false: every recovery starts every rank anew (the "
                         "comparison for the default, which keeps the workers that did not fail)")
    ap.add_argument("--only", action="append", default=[], metavar="SCENARIO",
                    help="run only this scenario (repeatable), e.g. --only 'exit 2/5'")
    args = ap.parse_args(argv)
    names = [n for n, _, _ in plan(args.smoke)] + ([] if args.smoke else [NODE_LOSS, "coordinator kill + resume"])
    if unknown := [n for n in args.only if n not in names]:
        ap.error(f"--only {unknown[0]!r}: expected one of {names}")
    chosen = set(args.only or names)
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: must be >= 1")
    tag = "faults-smoke" if args.smoke else "faults" if args.repeat == 1 else f"faults-repeat{args.repeat}"
    tag += "-restart-all" if args.restart_all else ""
    root = run_root(tag)
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    base_raw = raw_config(root)
    if args.smoke:
        base_raw["train"]["epochs"] = 2
    base_raw["cluster"]["keep_survivors"] = not args.restart_all
    base = load_config(raw=base_raw)

    def case(rep: int, name: str, *overrides: str) -> RunConfig:
        # with repeats every run partitions afresh: the parts must be reproducible too
        slug = name.replace(" ", "_").replace("/", "-")
        own = [f"partition.root={root / 'parts' / f'{rep}-{slug}'}"]
        return base.with_overrides([*overrides, *(own if args.repeat > 1 else [])])

    t_start = time.perf_counter()
    info = machine()
    from gnntrain.runtime.cluster import ray_session

    rows: list[dict[str, Any]] = []
    partial = OUT / f"{tag}.partial.json"
    load = (os.cpu_count() or 1) if args.repeat > 1 else 0
    with ray_session(base.cluster, 2):
        ref_row = run_case("undisturbed (reference)", base, None)  # measured without load
        if not ref_row["finished"]:
            return conclude("faults", [check("the undisturbed run finishes", False, str(ref_row["error"]))])
        ref = params(Path(ref_row["run_dir"]))
        with saturated(load):
            for name, overrides, killer in plan(args.smoke):  # one scenario's N runs, then the next
                if name not in chosen:
                    continue
                for rep in range(args.repeat):
                    _record(rows, run_case(name, case(rep, name, *overrides), ref, killer=killer), rep, args.repeat,
                            partial)
    if NODE_LOSS in chosen:
        with saturated(load):
            for rep in range(args.repeat):
                parts = case(rep, NODE_LOSS).partition.root  # its own run root, the partition as case() says
                _record(rows, node_loss(root / f"nodes{rep}", [f"partition.root={parts}"], ref), rep, args.repeat,
                        partial)
    if "coordinator kill + resume" in chosen:
        with saturated(load):
            for rep in range(args.repeat):
                (root / f"coord{rep}").mkdir(parents=True, exist_ok=True)
                _record(rows, coordinator_kill(root / f"coord{rep}", ref), rep, args.repeat, partial)
    total = time.perf_counter() - t_start
    print(f"\nfault drills: 2 Ray workers, {base.train.epochs} epochs, checkpoint every epoch; "
          f"undisturbed run {ref_row['wall_s']:.1f} s"
          + (f"; {args.repeat} runs per scenario with {load} busy-loop processes on "
             f"{os.cpu_count()} cores" if args.repeat > 1 else ""))
    print(f"{'scenario':<26} {'inj':>3} {'finished':>8} {'correct':>7} {'blamed':>6} {'new':>5} {'detect s':>8} "
          f"{'recovery s':>10} {'redone':>6} {'wall s':>7}")
    for r in rows:
        print(f"{r['scenario']:<26} {r['injected']:>3} {str(r['finished']):>8} "
              f"{str(r.get('correct', False)):>7} {_fmt(r.get('blamed')):>6} "
              f"{'/'.join(_fmt(n) for n in r.get('restarted') or []) or '-':>5} "
              f"{_fmt(r.get('detect_s')):>8} {_fmt(r.get('recovery_s')):>10} "
              f"{_fmt(r.get('epochs_redone')):>6} {r.get('wall_s', float('nan')):>7.1f}")
    for r in rows:
        if "resume_s" in r:
            print(f"{r['scenario']}: killed after {r['resumed_from_epoch']} checkpointed epochs; "
                  f"its workers were gone {r['workers_gone_s']:.1f} s after the kill "
                  f"({len(r['workers_left_after_kill'])} left); the resumed run took "
                  f"{r['resume_s']:.1f} s (Ray start, reload, the remaining epochs)")
    for r in rows:
        for m in r.get("moves") or []:
            print(f"{r['scenario']}: rank {m['rank']} (part {m['part']}) {m['kind']} from node "
                  f"{m['from_node'][:8]} to node {m['to_node'][:8]}; {r.get('alive_nodes_after', '?')} node(s) "
                  "left in the cluster")
    print("new = ranks whose worker was started anew (the others were kept, cluster.keep_survivors); "
          "detect s = attempt start -> failure detected; recovery s = detected -> new workers "
          "ready; redone = finished epochs trained again (the interrupted one always is)")
    per: dict[str, list[bool]] = {}
    for r in rows:
        per.setdefault(r["scenario"], []).append(bool(r["finished"] and r.get("correct")))
    print("\nidentical to the undisturbed run (every rank's model and optimizer state), per scenario:")
    for name, oks in per.items():
        print(f"  {name:<26} {sum(oks)}/{len(oks)}")
    injected = sum(r["injected"] for r in rows)
    correct = sum(1 for r in rows if r["finished"] and r.get("correct"))
    print(f"\nfaults injected {injected}, runs finished with the undisturbed parameters {correct}/"
          f"{len(rows)}; total {total:.0f} s")
    OUT.mkdir(parents=True, exist_ok=True)
    path = out_path(tag)
    out: dict[str, Any] = {"machine": info, "reference_s": ref_row["wall_s"], "rows": rows,
                           "repeat": args.repeat, "load_processes": load,
                           "identical": {k: [sum(v), len(v)] for k, v in per.items()},
                           "injected": injected, "correct": correct, "total_s": total}
    status = conclude("faults", [
        check(f"{name}: {sum(oks)}/{len(oks)} runs finish with the undisturbed state", all(oks))
        for name, oks in per.items()], out)
    path.write_text(json.dumps(out, indent=1, default=str))
    partial.unlink(missing_ok=True)
    print(f"wrote {path}")
    shutil.rmtree(root, ignore_errors=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
