"""A node leaves the cluster for good: ``cluster.on_worker_loss`` = ``shrink`` or ``restart``.

Two simulated nodes (``ray.cluster_utils.Cluster``: one raylet each, one CPU each, a
head without CPUs), two workers, one per node: the fewest that lose a node and keep one.
Worker 0 holds still at epoch 2 step 0 (so the run cannot move on), and once the epoch-2
checkpoint exists the drill removes the second node for good. With ``shrink`` the lost
rank runs on the surviving node and the run ends with exactly the parameters and
optimizer state of an undisturbed run on every rank; with ``restart`` the run ends soon
after ``cluster.replace_timeout_s`` with an error naming the worker and the node.

The partition set lives on an S3 server on 127.0.0.1 and every node has a temp directory
of its own, as separate machines have: each worker stages its own part to its node's
scratch, the next run on the same nodes copies nothing, and a rank moved to a node that
never had its part stages it there again, with the same parameters at the end.

The cluster lives in a subprocess (``python -m tests.faults.test_elastic OUT``), so it
never meets the test session's own local Ray; the drill writes what it saw to
``OUT/drill.json`` and the tests below judge it.
"""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from bench.harness.s3 import new_bucket, s3_server
from bench.nodes import NODE_TEMP, add_node, drill_main, remove_when, simulated_nodes, spawn_drill
from tests.conftest import REPO, make_graph

GRAPH_NODES, GRAPH_SEED = 450, 7
WORKERS = 2  # nodes too: one worker per node
REPLACE_S = 2.0
DRILL_LIMIT_S = 420  # the drill takes about 80 s on 2 cores
# pytest-timeout's limit above the drill's own: past DRILL_LIMIT_S spawn_drill stops the
# drill and its cluster and fails the tests with the drill's log
pytestmark = pytest.mark.timeout(DRILL_LIMIT_S + 120)
BASE = ("train.epochs=4", "train.checkpoint_every=1", "train.keep_checkpoints=5",
        "sampler.batch_size=16", "model.dropout=0.3", "cluster.collective_timeout_s=60",
        "cluster.stall_timeout_s=120", "train.max_failures=1", f"cluster.replace_timeout_s={REPLACE_S}")
STALL = ("faults.kind=stall", "faults.rank=0", "faults.epoch=2", "faults.step=0")


# ---------------------------------------------------------------------------------------
# the drill (runs in the subprocess)


def _scenario(out: dict[str, Any], name: str, fn: Any) -> None:
    t0 = time.monotonic()
    try:
        out[name] = fn()
    except BaseException as e:  # noqa: BLE001 - every scenario reports, whatever happens
        out[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    out.setdefault("scenario_s", {})[name] = round(time.monotonic() - t0, 1)  # where the drill's time goes


def _staged_parts(temp: Path) -> list[str]:
    """The parts staged under a node's (or the driver's) temp directory."""
    from partition.storage import default_scratch

    return sorted(p.name for p in (temp / default_scratch().name).glob("*/part-*"))


def drill(out_dir: Path) -> dict[str, Any]:
    import tempfile

    import ray

    from gnntrain.runtime.coordinator import run_training
    from gnntrain.runtime.worker_pool import reuse_workers
    from partition.storage import open_store
    from tests.runtime.helpers import final_state, tiny_cfg
    from tests.runtime.test_failures import assert_nothing_left

    graph = make_graph(GRAPH_NODES, seed=GRAPH_SEED)
    driver_tmp = out_dir / "driver-tmp"  # the coordinator's node-local scratch goes here
    driver_tmp.mkdir()
    tempfile.tempdir = str(driver_tmp)
    node_tmp = out_dir / "node-tmp"
    # a scenario's group is kept for the next of the same shape (the undisturbed run's
    # serves the shrink run, the replaced run's the restart run): fewer actors to start
    with s3_server() as endpoint, simulated_nodes(WORKERS, node_tmp) as (cluster, nodes), reuse_workers():
        out: dict[str, Any] = {"nodes": [n.node_id for n in nodes]}
        uri, options = new_bucket(endpoint, "drill")
        store = (f"partition.root={uri}/parts", f"partition.storage_options={json.dumps(options)}")

        def cfg(root: Path, *extra: str) -> Any:
            return tiny_cfg(root, *BASE, *store, *extra, workers=WORKERS)

        def staged_where() -> dict[str, Any]:
            """The parts staged on every node, and on the driver."""
            return {"nodes": {n: _staged_parts(t) for n, t in NODE_TEMP.items()},
                    "driver": _staged_parts(driver_tmp)}

        def undisturbed() -> dict[str, Any]:
            s = run_training(cfg(out_dir / "undisturbed"), graph=graph, progress=False)
            sets = open_store(f"{uri}/parts", options)
            [name] = sets.names()
            manifest = json.loads(sets.child(name).read_bytes("meta.json"))
            return {"summary": s, "digests": final_state(s)["rank_digests"], "staged": staged_where(),
                    "set_files": {rel: f["bytes"] for rel, f in manifest["files"].items()}}

        def lose_node(mode: str, node: Any, replace: bool = False) -> dict[str, Any]:
            root = out_dir / (mode + ("-replaced" if replace else ""))
            removed: dict[str, Any] = {}
            remover = remove_when(cluster, node, root / "runs", removed, replace=replace, temp_root=node_tmp)
            got: dict[str, Any] = {"removed_node": node.node_id}
            wait = ("cluster.replace_timeout_s=120",) if replace else ()
            try:
                s = run_training(cfg(root, f"cluster.on_worker_loss={mode}", *STALL, *wait), graph=graph,
                                 progress=False)
                got.update(summary=s, digests=final_state(s)["rank_digests"],
                           failures_json=json.loads((Path(s["run_dir"]) / "failures.json").read_text()))
            except Exception as e:  # noqa: BLE001 - the restart case is expected to end here
                got.update(error=f"{type(e).__name__}: {e}")
            ended = time.monotonic()
            remover.join(timeout=60)
            got["after_removal_s"] = ended - removed["at"] if "at" in removed else None
            if "new" in removed:
                got["new_node"] = removed["new"].node_id
                out["nodes"].append(removed["new"].node_id)
            try:
                assert_nothing_left()
                got["leftovers"] = None
            except AssertionError as e:
                got["leftovers"] = str(e)
            got["alive_nodes"] = sum(1 for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU"))
            got["staged"] = staged_where()
            return got

        _scenario(out, "undisturbed", undisturbed)
        _scenario(out, "shrink", lambda: lose_node("shrink", nodes[1]))
        spare = add_node(cluster, "node_c", node_tmp)  # two nodes again
        out["nodes"].append(spare.node_id)
        _scenario(out, "replaced", lambda: lose_node("restart", spare, replace=True))
        last = next(n for n in cluster.worker_nodes if n.node_id == out["nodes"][-1])
        _scenario(out, "restart", lambda: lose_node("restart", last))
    return out


# ---------------------------------------------------------------------------------------
# the tests (judge the drill's record)


@pytest.fixture(scope="module")
def drill_record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    record, why = spawn_drill("tests.faults.test_elastic", tmp_path_factory.mktemp("elastic"), DRILL_LIMIT_S, REPO)
    if record is None:
        pytest.fail(why)
    return record


def _ok(rec: dict[str, Any], name: str) -> dict[str, Any]:
    got = rec[name]
    assert "traceback" not in got, f"{name}: {got.get('error')}\n{got.get('traceback')}"
    return dict(got)


def test_shrink_finishes_on_fewer_nodes_with_the_undisturbed_parameters(drill_record: dict[str, Any]) -> None:
    want = _ok(drill_record, "undisturbed")["digests"]
    got = _ok(drill_record, "shrink")
    assert "error" not in got, got["error"]
    assert len(set(want)) == 1 and len(want) == WORKERS, "the undisturbed replicas differ"
    assert got["summary"]["epochs"] == 4
    assert got["alive_nodes"] == WORKERS - 1, "the run should have ended with one node fewer"
    # every rank's model and optimizer state equals the undisturbed run's
    assert got["digests"] == want, f"shrunk run {got['digests']} != undisturbed {want}"
    assert got["leftovers"] is None, got["leftovers"]


def test_shrink_is_recorded_in_failures_json_and_the_summary(drill_record: dict[str, Any]) -> None:
    got = _ok(drill_record, "shrink")
    [f] = got["failures_json"]
    assert got["summary"]["failures"][0]["moves"] == f["moves"]  # the summary carries the record
    lost = got["removed_node"]
    survivors = [n for n in drill_record["nodes"][:WORKERS] if n != lost]
    [m] = f["moves"]
    assert m["from_node"] == lost and m["to_node"] in survivors and m["kind"] == "shrunk", m
    assert m["part"] == m["rank"]  # ranks keep their parts
    assert f["lost_nodes"] == [lost] and (f["nodes_before"], f["nodes_after"]) == (WORKERS, WORKERS - 1)
    assert f["restart_from_epoch"] == 2 and f["epochs_redone"] == 0  # epoch 2 never finished
    assert f["replace_wait_s"] >= REPLACE_S and f["recovery_s"] >= f["replace_wait_s"]


def test_restart_goes_on_when_a_new_node_joins_within_the_replace_timeout(
        drill_record: dict[str, Any]) -> None:
    want = _ok(drill_record, "undisturbed")["digests"]
    got = _ok(drill_record, "replaced")
    assert "error" not in got, got["error"]
    assert got["digests"] == want
    [f] = got["failures_json"]
    [m] = f["moves"]
    assert (m["from_node"], m["to_node"], m["kind"]) == (got["removed_node"], got["new_node"], "replaced"), m
    assert (f["nodes_before"], f["nodes_after"]) == (WORKERS, WORKERS), f
    assert f["replace_wait_s"] > 0 and "error" not in got  # it waited, and the new node was taken
    assert got["leftovers"] is None, got["leftovers"]


def test_restart_fails_naming_the_worker_and_node_after_the_replace_timeout(
        drill_record: dict[str, Any]) -> None:
    got = _ok(drill_record, "restart")
    err = got.get("error")
    assert err is not None, "on_worker_loss=restart should end the run when the node is gone"
    assert err.startswith("NodeLost: worker "), err
    assert f"on node {got['removed_node']}" in err and "cluster.on_worker_loss=shrink" in err, err
    assert got["after_removal_s"] is not None, "the drill never removed the node"
    assert got["after_removal_s"] >= REPLACE_S, got["after_removal_s"]  # waited the replace timeout out
    assert got["leftovers"] is None, got["leftovers"]


def _own_files(rec: dict[str, Any], rank: int) -> set[str]:
    """The set's files a holder of part ``rank`` reads: the set-level ones and its own."""
    files = rec["undisturbed"]["set_files"]
    return {rel for rel in files if not rel.startswith("part-") or rel.startswith(f"part-{rank}/")}


def _staging(rec: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """``summary.json``'s staging record of a scenario: per worker group started, per rank."""
    return list(_ok(rec, name)["summary"]["staging"])


def test_each_worker_stages_only_its_own_part_from_the_store_to_its_own_node(
        drill_record: dict[str, Any]) -> None:
    [start] = _staging(drill_record, "undisturbed")
    workers = start["workers"]
    assert start["attempt"] == 0 and [w["rank"] for w in workers] == list(range(WORKERS))
    assert len({w["node"] for w in workers}) == WORKERS, "one worker per node"
    sizes = drill_record["undisturbed"]["set_files"]
    for w in workers:
        own = _own_files(drill_record, w["rank"])
        # exactly its own files were read from the store, every byte of them, no other part's
        assert set(w["fetched"]) == own and w["reused"] == [], w
        assert w["fetched_bytes"] == sum(sizes[r] for r in own), w
        assert w["source"].startswith("s3://drill/parts/")
    staged = drill_record["undisturbed"]["staged"]
    for w in workers:  # each node's scratch holds its worker's part and nothing else
        assert staged["nodes"][w["node"]] == [f"part-{w['rank']}"], staged
    assert staged["driver"] == [], "the coordinator staged a part"


def test_the_next_run_reuses_staged_parts_and_a_moved_rank_stages_its_part_where_it_lands(
        drill_record: dict[str, Any]) -> None:
    first, after = _staging(drill_record, "shrink")  # the group before the loss, and after it
    for w in first["workers"]:  # the same nodes as the undisturbed run: nothing copied again
        assert (w["fetched"], set(w["reused"])) == ([], _own_files(drill_record, w["rank"])), w
    [move] = _ok(drill_record, "shrink")["failures_json"][0]["moves"]
    assert after["attempt"] == 1
    for w in after["workers"]:
        if w["rank"] == move["rank"]:  # on a survivor: the set-level files were there, its part not
            assert w["node"] == move["to_node"]
            assert set(w["fetched"]) == {r for r in _own_files(drill_record, w["rank"]) if r.startswith("part-")}
        else:
            assert w["fetched"] == [], w
    assert f"part-{move['rank']}" in _ok(drill_record, "shrink")["staged"]["nodes"][move["to_node"]]

    replaced = _ok(drill_record, "replaced")
    [move] = replaced["failures_json"][0]["moves"]
    [w] = [w for w in _staging(drill_record, "replaced")[-1]["workers"] if w["rank"] == move["rank"]]
    # a node that joined with an empty scratch: the whole of what the rank reads is copied
    assert w["node"] == replaced["new_node"] and set(w["fetched"]) == _own_files(drill_record, w["rank"])
    assert replaced["staged"]["nodes"][replaced["new_node"]] == [f"part-{move['rank']}"]


def test_plan_replaces_lost_nodes_first_then_shrinks_onto_the_least_loaded_survivor() -> None:
    from gnntrain.runtime.placement import Move, bundle_cpus, plan

    prev = ["a", "a", "b", "c"]  # ranks 0, 1 on a; 2 on b; 3 on c
    assert plan(prev, {"a": 2, "b": 1, "c": 1}, shrink=False) == []  # nothing lost: stay
    # node a lost, node d joined: both of a's ranks go to d together
    assert plan(prev, {"b": 1, "c": 1, "d": 2}, shrink=False) == [
        Move(0, "a", "d", "replaced"), Move(1, "a", "d", "replaced")]
    assert plan(prev, {"b": 1, "c": 1}, shrink=False) is None  # restart waits
    # shrink: a's ranks are spread over the survivors, fewest ranks first (b, then c)
    assert plan(prev, {"b": 1, "c": 1}, shrink=True) == [
        Move(0, "a", "b", "shrunk"), Move(1, "a", "c", "shrunk")]
    assert plan(prev, {}, shrink=True) is None  # no survivor
    # a node running two ranks shares its CPUs between them
    assert bundle_cpus(["b", "b", "c"], {"b": 1.0, "c": 1.0}, per=1.0) == [0.5, 0.5, 1.0]
    assert bundle_cpus(["b", "b", "b"], {"b": 1.0}, per=0.25) == [0.25, 0.25, 0.25]
    assert sum(bundle_cpus(["b"] * 3, {"b": 1.0}, per=1.0)) <= 1.0


def test_on_worker_loss_is_validated() -> None:
    from gnntrain.config import ConfigError, load_config

    with pytest.raises((ConfigError, ValueError), match="on_worker_loss"):
        load_config(raw={"dataset": {"name": "t", "source": "synthetic"},
                         "cluster": {"on_worker_loss": "wait"}})


if __name__ == "__main__":
    drill_main(drill)
