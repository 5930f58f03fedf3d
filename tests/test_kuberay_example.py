"""examples/kuberay/rayjob.yaml: a RayJob a user applies as it is (but for bucket and
image names). No Kubernetes here: the manifest's parts are checked against gnntrain itself."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from gnntrain.config import load_config
from gnntrain.run import build_parser
from tests.conftest import REPO

MANIFEST = REPO / "examples" / "kuberay" / "rayjob.yaml"


def _docs() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text())}


def _containers(job: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    spec = job["spec"]["rayClusterSpec"]
    pods = [spec["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in spec["workerGroupSpecs"]]
    return [(pod, c) for pod in pods for c in pod["containers"]]


def test_the_entrypoint_runs_the_mounted_config_and_it_is_valid() -> None:
    docs = _docs()
    job, config_map = docs["RayJob"], docs["ConfigMap"]
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:3] == ["python", "-m", "gnntrain.run"]
    args = build_parser().parse_args(argv[3:])
    mount = Path(args.config).parent
    head_pod = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    [volume] = [v for v in head_pod["volumes"] if v.get("configMap", {}).get("name") == config_map["metadata"]["name"]]
    [(head_container)] = head_pod["containers"]
    assert {"name": volume["name"], "mountPath": str(mount)} in head_container["volumeMounts"]
    cfg = load_config(raw=yaml.safe_load(config_map["data"][Path(args.config).name]))

    # everything in the store, nothing on a shared filesystem
    for uri in (cfg.dataset.edges.path, cfg.dataset.nodes.path, cfg.partition.root, cfg.train.run_root):  # type: ignore[union-attr]
        assert str(uri).startswith("s3://"), uri
    # the scratch directory is node-local on every pod
    for pod, container in _containers(job):
        scratch = [v["name"] for v in pod["volumes"] if "emptyDir" in v]
        assert {"name": scratch[0], "mountPath": cfg.cluster.scratch_dir} in container["volumeMounts"]
    # the worker pods hold the workers
    groups = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    cpus = sum(g["replicas"] * float(g["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"])
               for g in groups)
    assert cfg.cluster.workers * cfg.cluster.cpus_per_worker <= cpus


def test_the_cluster_requires_a_token_and_no_secret_is_written_in_it() -> None:
    job = _docs()["RayJob"]
    assert job["spec"]["rayClusterSpec"]["authOptions"] == {"mode": "token"}
    assert tuple(int(v) for v in job["spec"]["rayClusterSpec"]["rayVersion"].split(".")[:2]) >= (2, 52)
    for _, container in _containers(job):
        assert "env" not in container or all("value" not in e for e in container["env"])
        assert [s["secretRef"]["name"] for s in container["envFrom"]] == ["gnntrain-s3"]
