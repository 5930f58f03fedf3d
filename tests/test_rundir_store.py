"""Run directories on object storage (an S3 server on 127.0.0.1), in-process runs without Ray:
the store holds the run's files and complete checkpoints; a run resumed from the store ends
bit for bit where the uninterrupted run ends; load and predict read it back; a damaged object, a
missing bucket and a URI without a run fail before any work with one line naming the URI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import gnntrain
from gnntrain import run as cli
from gnntrain.api import check_startable, resolve_config
from gnntrain.checkpoint import load_latest
from gnntrain.config import ConfigError
from gnntrain.predict import PredictError, predict
from gnntrain.rundir import RunDir
from gnntrain.rundir_store import RunStoreError
from tests.conftest import make_graph
from tests.runtime.helpers import assert_same_state, tiny_cfg

S3Bucket = tuple[str, dict[str, object]]


def test_a_run_on_s3_is_mirrored_resumed_and_loaded(s3_bucket: S3Bucket, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import s3fs

    uri, options = s3_bucket
    fs = s3fs.S3FileSystem(**options)
    g = make_graph(200, seed=4)
    store = [f"train.run_root={uri}/runs", f"train.storage_options={json.dumps(options)}"]
    run = gnntrain.fit(tiny_cfg(tmp_path, *store, "train.checkpoint_every=1",
                                f"cluster.scratch_dir={tmp_path / 'node-a'}"),
                       graph=g, single_process=True, progress=False)
    where = run.location
    assert where.startswith(f"{uri}/runs/tiny-") and run.summary["run_dir"] == where
    assert run.run_dir.is_relative_to(tmp_path / "node-a")  # the staging copy
    key = where[len("s3://"):]
    objects = {p[len(key) + 1:] for p in fs.find(key)}
    assert {"config.yaml", "model.json", "metrics.jsonl", "summary.json", "comm.json",
            "checkpoints/ckpt-00001.pt", "checkpoints/ckpt-00001.manifest.json",
            "checkpoints/ckpt-00002.pt", "checkpoints/ckpt-00002.manifest.json",
            "checkpoints/best.pt", "checkpoints/best.manifest.json"} <= objects
    manifest = json.loads(fs.cat_file(f"{key}/checkpoints/ckpt-00002.manifest.json"))
    assert list(manifest["files"]) == ["ckpt-00002.pt"]
    assert manifest["files"]["ckpt-00002.pt"]["bytes"] == fs.size(f"{key}/checkpoints/ckpt-00002.pt")
    uninterrupted = load_latest(RunDir(run.run_dir))

    # the second checkpoint's manifest never arrived (the run was interrupted while uploading
    # it): its objects are not a checkpoint. Resumed on another node (an empty scratch), the
    # run continues from the first and ends where the uninterrupted run ended
    fs.rm_file(f"{key}/checkpoints/ckpt-00002.manifest.json")
    resumed = gnntrain.fit(None, resume=where, graph=g, single_process=True, progress=False,
                           **{"train.storage_options": options,
                              "cluster.scratch_dir": str(tmp_path / "node-b")})
    assert resumed.location == where and resumed.run_dir.is_relative_to(tmp_path / "node-b")
    assert_same_state(load_latest(RunDir(resumed.run_dir)), uninterrupted)
    lines = fs.cat_file(f"{key}/metrics.jsonl").decode().splitlines()
    assert [json.loads(ln)["epoch"] for ln in lines] == [0, 1]
    assert fs.exists(f"{key}/checkpoints/ckpt-00002.manifest.json")

    # loaded from the store: the parameters of the last checkpoint
    loaded = gnntrain.load(where, storage_options=options, checkpoint="last")
    assert loaded.epochs_done == 2 and loaded.location == where
    for k, v in uninterrupted["model"].items():
        assert torch.equal(loaded.model.state_dict()[k], v), k

    # predictions from the store's run: written to --out (required), same parameters
    with pytest.raises(PredictError, match="is in an object store: give --out"):
        predict(where, storage_options=options, single_process=True, graph=g, progress=False)
    out = predict(where, "logits", out=tmp_path / "logits", storage_options=options, single_process=True,
                  graph=g, progress=False, checkpoint="last")
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["run_dir"], manifest["checkpoint_epoch"]) == (where, 2)

    # no secret in any object of the store or any file of the staging copies
    written = [fs.cat_file(p) for p in fs.find(uri[len("s3://"):])]
    written += [p.read_bytes() for p in tmp_path.glob("node-*/**/*") if p.is_file()]
    for data in written:
        assert str(options["secret"]).encode() not in data and str(options["key"]).encode() not in data
    assert str(options["endpoint_url"]) in fs.cat_file(f"{key}/config.yaml").decode()

    # a checkpoint object altered in the store: the resume fails before any work, naming it
    obj = f"{key}/checkpoints/ckpt-00002.pt"
    data = bytearray(fs.cat_file(obj))
    data[-1] ^= 0xFF
    fs.pipe_file(obj, bytes(data))
    capsys.readouterr()
    code = cli.main(["--resume", where, "--single-process", "--no-progress",
                     "--set", f"train.storage_options={json.dumps(options)}",
                     "--set", f"cluster.scratch_dir={tmp_path / 'node-c'}"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and err.startswith("error: checkpoint object"), err
    assert f"{where}/checkpoints/ckpt-00002.pt differs from its manifest" in err
    assert f"delete {where}/checkpoints/ckpt-00002.manifest.json" in err
    assert str(options["secret"]) not in err


def test_a_missing_bucket_wrong_endpoint_or_run_fails_before_any_work(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    uri, options = s3_bucket
    sets = f"train.storage_options={json.dumps(options)}"
    cfg = tiny_cfg(tmp_path, "train.run_root=s3://no-such-bucket/runs", sets)
    with pytest.raises(ConfigError) as err:
        check_startable(cfg, single_process=True)
    msg = str(err.value)
    assert msg.startswith("train.run_root='s3://no-such-bucket/runs': cannot write run directories")
    assert "check the URI, the bucket" in msg and str(options["secret"]) not in msg
    dead = {**options, "endpoint_url": "http://127.0.0.1:9", "config_kwargs": {
        "retries": {"max_attempts": 1}, "connect_timeout": 1}}
    with pytest.raises(ConfigError) as err:
        check_startable(cfg.with_overrides([f"train.run_root={uri}/runs",
                                            f"train.storage_options={json.dumps(dead)}"]), single_process=True)
    msg = str(err.value)
    assert msg.startswith(f"train.run_root='{uri}/runs': cannot write run directories") and "endpoint" in msg
    with pytest.raises(FileNotFoundError, match=rf"--resume {uri}/runs/nothing: not a run directory "
                                                r"\(no config.yaml there\); give the URI of a run"):
        resolve_config(None, [sets], resume=f"{uri}/runs/nothing")


def test_checkpoints_with_side_files_rotate_and_come_back_whole(tmp_path: Path) -> None:
    """The mirror over any store (a local one here, no server): side files listed before the
    checkpoint, rotation counted in the store, best.pt replaced, and a fetch that brings the
    newest and best checkpoints back and refuses a side file that differs."""
    from gnntrain.checkpoint import BEST, load_part_file, save_checkpoint
    from gnntrain.rundir_store import RunMirror
    from partition.storage import LocalStore

    store = LocalStore(tmp_path / "store")
    run = RunDir(tmp_path / "staging", RunMirror(store))
    state = {"model": {"w": torch.ones(2)}, "opt": {"state": {}, "param_groups": []}}
    for epoch in (1, 2, 3):
        parts = [{"rows": torch.full((2,), float(10 * epoch + p))} for p in range(2)]
        save_checkpoint(run, epoch, state, keep=2, parts=parts)
        save_checkpoint(run, epoch, state, keep=2, parts=parts, stem=BEST)
    names = sorted(p.name for p in (tmp_path / "store" / "checkpoints").iterdir())
    assert names == sorted(f"{s}{x}" for s in ("ckpt-00002", "ckpt-00003", "best")
                           for x in (".pt", ".part-0.pt", ".part-1.pt", ".manifest.json"))
    manifest = json.loads((tmp_path / "store" / "checkpoints" / "ckpt-00003.manifest.json").read_text())
    assert list(manifest["files"]) == ["ckpt-00003.part-0.pt", "ckpt-00003.part-1.pt", "ckpt-00003.pt"]

    fetched = RunDir(tmp_path / "node-b")
    RunMirror(store).fetch(fetched.path)
    assert sorted(p.name for p in (fetched.path / "checkpoints").iterdir()) == sorted(
        f"{s}{x}" for s in ("ckpt-00003", "best") for x in (".pt", ".part-0.pt", ".part-1.pt"))
    assert load_latest(fetched)["epochs_done"] == 3  # type: ignore[index]
    assert torch.equal(load_part_file(fetched, "best.part-1.pt")["rows"], torch.full((2,), 31.0))

    side = tmp_path / "store" / "checkpoints" / "ckpt-00003.part-1.pt"
    side.write_bytes(side.read_bytes()[:-1] + bytes([side.read_bytes()[-1] ^ 0xFF]))
    with pytest.raises(RunStoreError, match=r"ckpt-00003\.part-1\.pt differs from its manifest"):
        RunMirror(store).fetch(tmp_path / "node-c")


def test_an_interrupted_checkpoint_upload_leaves_no_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An upload that fails midway removes what it sent (the earlier checkpoints stay whole);
    the objects of one killed before it could (files, no manifest) go at the next rotation."""
    from gnntrain.checkpoint import save_checkpoint
    from gnntrain.rundir_store import RunMirror
    from partition.storage import LocalStore

    store = LocalStore(tmp_path / "store")
    run = RunDir(tmp_path / "staging", RunMirror(store))
    state = {"model": {"w": torch.ones(2)}, "opt": {"state": {}, "param_groups": []}}
    parts = [{"rows": torch.zeros(2)} for _ in range(2)]
    save_checkpoint(run, 1, state, keep=3, parts=parts)
    ckpts = tmp_path / "store" / "checkpoints"
    first = sorted(p.name for p in ckpts.iterdir())

    real_put = LocalStore.put

    def failing(self: LocalStore, rel: str, src: Path) -> object:
        if rel == "ckpt-00002.part-1.pt":
            raise OSError("the store went away")
        return real_put(self, rel, src)

    monkeypatch.setattr(LocalStore, "put", failing)
    with pytest.raises(OSError, match="went away"):
        save_checkpoint(run, 2, state, keep=3, parts=parts)
    assert sorted(p.name for p in ckpts.iterdir()) == first  # ckpt-00002.part-0.pt went again
    monkeypatch.undo()

    # a killed upload's objects: two files of ckpt-00002, no manifest
    for name in ("ckpt-00002.part-0.pt", "ckpt-00002.pt"):
        (ckpts / name).write_bytes(b"half")
    save_checkpoint(run, 3, state, keep=3, parts=parts)
    assert sorted(p.name for p in ckpts.iterdir()) == sorted(
        f"{s}{x}" for s in ("ckpt-00001", "ckpt-00003") for x in (".pt", ".part-0.pt", ".part-1.pt", ".manifest.json"))


def test_a_run_staged_within_the_scratch_limit_removes_idle_entries_only(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    """``cluster.scratch_max_gb`` covers every scratch entry: a staged set, run copies
    (``runs/``) and fetched runs (``cache/``) that no process holds and nobody used in the
    last minute go, least recently used first; one a live ``RunDir`` holds, one used just
    now and the new run's own copy stay; the new copy is held while its ``RunDir`` lives."""
    import gc
    import os
    import time

    from partition.staging import LAST_USED, _held, hold

    uri, options = s3_bucket
    scratch = tmp_path / "scratch"
    old = {name: scratch / name for name in ("set-0123", "runs/d1/old-run", "cache/d2/fetched", "runs/d1/held",
                                             "runs/d1/recent")}
    (old["set-0123"] / "part-0").mkdir(parents=True)
    (old["set-0123"] / "meta.json").write_text("{}")
    for name, path in old.items():
        path.mkdir(parents=True, exist_ok=True)
        (path / "data.bin").write_bytes(b"x" * 1000)
        age = 10 if name.endswith("recent") else 600
        (path / LAST_USED).touch()
        os.utime(path / LAST_USED, (time.time() - age,) * 2)
    held = hold(old["runs/d1/held"])
    os.utime(old["runs/d1/held"] / LAST_USED, (time.time() - 600,) * 2)

    run = RunDir.create(f"{uri}/runs", "g", storage_options=options, scratch=scratch, max_bytes=1)
    assert run.path.parents[2] == scratch and _held(run.path)
    assert {n for n, p in old.items() if p.exists()} == {"runs/d1/held", "runs/d1/recent"}
    held.close()
    assert not _held(old["runs/d1/held"])
    del run
    gc.collect()
    assert not any(_held(p) for p in (scratch / "runs").glob("*/*"))
    # without a limit nothing goes
    RunDir.create(f"{uri}/runs", "g", storage_options=options, scratch=scratch)
    assert old["runs/d1/held"].exists()
